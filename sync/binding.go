package sync

import (
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayconfig"
)

// gatewayVerdict is the decision on a Gateway of one of our classes.
type gatewayVerdict struct {
	accepted  bool
	reason    gatewayv1.GatewayConditionReason
	message   string
	listeners []listenerState
	// sets are the ListenerSets naming the Gateway, in precedence order.
	sets []listenerSetVerdict
	// unservable says why an accepted Gateway cannot be programmed at all ("" when it
	// can): it asks for what Consul cannot do (gatewayTLSProblem).
	unservable string
}

// admitsRoutes reports whether routes may attach to the Gateway's listeners. Only a
// problem of the Gateway itself (its class, parameters or addresses) keeps them off: a
// Gateway refused because none of its listeners is valid still has routes attach,
// since listener status does not impact attachment (ListenerStatus.AttachedRoutes).
func (v gatewayVerdict) admitsRoutes() bool {
	return v.accepted || v.reason == gatewayv1.GatewayReasonListenersNotValid
}

// evaluateGateway judges gw, whose class is ours, from its class and its listeners.
// Its own listeners are judged merged with those of the ListenerSets it allows, but
// only its own decide its acceptance; finishListenerSets decides the ListenerSets'.
func (d *decider) evaluateGateway(gw *gatewayv1.Gateway, class *gatewayv1.GatewayClass) (gatewayVerdict, error) {
	v, err := d.judgeGateway(gw, class)
	if err != nil {
		return gatewayVerdict{}, err
	}
	finishListenerSets(&v, gw)
	return v, nil
}

func (d *decider) judgeGateway(gw *gatewayv1.Gateway, class *gatewayv1.GatewayClass) (gatewayVerdict, error) {
	listeners, sets, err := d.mergedListeners(gw)
	if err != nil {
		return gatewayVerdict{}, err
	}
	v := gatewayVerdict{listeners: listeners, sets: sets}
	classParams, err := gatewayconfig.OfClass(d.configs, class)
	if err != nil {
		return gatewayVerdict{}, err
	}
	if classParams.Problem != "" {
		v.reason, v.message = gatewayv1.GatewayReasonInvalid, fmt.Sprintf("GatewayClass %s is not accepted: %s", class.Name, classParams.Problem)
		return v, nil
	}
	params, named, err := gatewayconfig.OfGateway(d.configs, gw, classParams.Config)
	if err != nil {
		return gatewayVerdict{}, err
	}
	if named && params.Problem != "" {
		v.reason, v.message = gatewayv1.GatewayReasonInvalidParameters, "spec.infrastructure.parametersRef: "+params.Problem
		return v, nil
	}
	if why := requestedAddressProblem(gw.Spec.Addresses, d.deployments != nil, params.Config); why != "" {
		v.reason, v.message = gatewayv1.GatewayReasonUnsupportedAddress, why
		return v, nil
	}
	v.unservable = gatewayTLSProblem(gw.Spec.TLS)
	var invalid []string
	for _, l := range listeners {
		if !l.programmable() {
			invalid = append(invalid, string(l.listener.Name))
		}
	}
	switch {
	case len(invalid) == 0:
		v.accepted, v.reason, v.message = true, gatewayv1.GatewayReasonAccepted, "Gateway is valid"
	case len(invalid) < len(listeners):
		v.accepted, v.reason = true, gatewayv1.GatewayReasonListenersNotValid
		v.message = fmt.Sprintf("listeners %s are not valid; the others are served", strings.Join(invalid, ", "))
	default:
		v.reason, v.message = gatewayv1.GatewayReasonListenersNotValid, "no listener is valid"
	}
	if refused := d.refusedInfrastructureKeys(gw); len(refused) > 0 {
		v.message += fmt.Sprintf("; spec.infrastructure keys %s are not propagated: the controller's --gateway-infrastructure-keys does not allow them", strings.Join(refused, ", "))
	}
	return v, nil
}

// refusedInfrastructureKeys are the keys of gw's spec.infrastructure labels and
// annotations left off its deployed objects; none when this controller deploys none.
func (d *decider) refusedInfrastructureKeys(gw *gatewayv1.Gateway) []string {
	infra := gw.Spec.Infrastructure
	if d.deployments == nil || infra == nil {
		return nil
	}
	return d.infrastructureKeys.RefusedInfrastructureKeys(gatewayapi.StringMap(infra.Labels), gatewayapi.StringMap(infra.Annotations))
}

// routeView is what binding needs to know of a route of any kind.
type routeView struct {
	kind       gatewayv1.Kind
	namespace  string
	name       string
	parentRefs []gatewayv1.ParentReference
	hostnames  []gatewayv1.Hostname // nil for kinds without hostnames
}

// parentBinding is the decision on one parentRef of a route that names one of our
// Gateways.
type parentBinding struct {
	ref       gatewayv1.ParentReference
	listeners []gatewayv1.SectionName // the listeners the route attaches to
	// programmableListeners are the attached listeners that can be programmed: where
	// the route is served.
	programmableListeners []gatewayv1.SectionName
	// consulListeners are, for each programmable listener, the Consul listener that
	// serves its port (listenerState.consulListener).
	consulListeners []gatewayv1.SectionName
	accepted        bool
	reason          gatewayv1.RouteConditionReason
	message         string
	// unservable is the Gateway's: why it is programmed nowhere.
	unservable string
	// servedOlder are the TCP listeners the route attaches to that serve an older
	// TCPRoute instead (tcpListenersServed), and that route.
	servedOlder []olderRoute
}

// olderRoute is a TCP listener and the older TCPRoute it serves.
type olderRoute struct {
	listener gatewayv1.SectionName
	route    cache.ObjectName
}

// served reports whether the route is accepted and some listener it attaches to can be
// programmed.
func (b parentBinding) served() bool {
	return b.accepted && len(b.programmableListeners) > 0 && b.unservable == ""
}

// bindParent decides whether the route attaches to gw through ref, per the Gateway API:
// the listeners ref selects (sectionName, port), then those whose allowedRoutes admit
// the route's kind and namespace, then those whose hostname intersects the route's.
// Attachment, and so acceptance, ignores listener status (Accepted, ResolvedRefs,
// Conflicted); the route is served only on the attached listeners that can be
// programmed.
func (d *decider) bindParent(route routeView, ref gatewayv1.ParentReference, target parentTarget, v gatewayVerdict) (parentBinding, error) {
	gw := target.gw
	b := parentBinding{ref: ref, unservable: v.unservable}
	if !v.admitsRoutes() {
		b.reason, b.message = gatewayv1.RouteReasonNoMatchingParent, fmt.Sprintf("Gateway %s/%s is not accepted: %s", gw.Namespace, gw.Name, v.message)
		return b, nil
	}
	listeners, why := target.listeners(v)
	if why != "" {
		b.reason, b.message = gatewayv1.RouteReasonNoMatchingParent, why
		return b, nil
	}
	selected := selectListeners(ref, listeners)
	if len(selected) == 0 {
		b.reason, b.message = gatewayv1.RouteReasonNoMatchingParent, "no listener matches the parentRef's sectionName and port"
		return b, nil
	}
	allowed, why, err := d.allowedListeners(route, selected)
	if err != nil {
		return b, err
	}
	if len(allowed) == 0 {
		b.reason, b.message = gatewayv1.RouteReasonNotAllowedByListeners, why
		return b, nil
	}
	var attached []*listenerState
	for _, st := range allowed {
		// A kind without hostnames (TCPRoute) has none to intersect, and attaches.
		if _, ok := intersectHostnames(st.listener.Hostname, route.hostnames); ok {
			attached = append(attached, st)
		}
	}
	if len(attached) == 0 {
		b.reason, b.message = gatewayv1.RouteReasonNoMatchingListenerHostname, "no listener hostname intersects the route's hostnames"
		return b, nil
	}
	for _, st := range attached {
		b.listeners = append(b.listeners, st.listener.Name)
		if st.programmable() {
			b.programmableListeners = append(b.programmableListeners, st.entryName)
			b.consulListeners = append(b.consulListeners, st.consulListener)
		}
	}
	b.accepted, b.reason, b.message = true, gatewayv1.RouteReasonAccepted, "Route is accepted"
	return b, nil
}

// parentTarget is what a route's parentRef names: a Gateway, or one of its
// ListenerSets (listenerSet is nil for the Gateway).
type parentTarget struct {
	gw          *gatewayv1.Gateway
	listenerSet *cache.ObjectName
}

// listeners returns the listeners of the target routes may attach to, or why there
// are none: a ListenerSet the Gateway does not allow has none.
func (t parentTarget) listeners(v gatewayVerdict) ([]listenerState, string) {
	if t.listenerSet == nil {
		return v.listeners, ""
	}
	sv := v.listenerSet(*t.listenerSet)
	if sv == nil || !sv.allowed {
		return nil, fmt.Sprintf("ListenerSet %s is not allowed by Gateway %s/%s", t.listenerSet, t.gw.Namespace, t.gw.Name)
	}
	return sv.listeners, ""
}

// selectListeners returns the listeners named by ref's sectionName and port (all when
// unset).
func selectListeners(ref gatewayv1.ParentReference, listeners []listenerState) []*listenerState {
	var selected []*listenerState
	for i := range listeners {
		l := listeners[i].listener
		if ref.SectionName != nil && *ref.SectionName != l.Name {
			continue
		}
		if ref.Port != nil && *ref.Port != l.Port {
			continue
		}
		selected = append(selected, &listeners[i])
	}
	return selected
}

// allowedListeners filters listeners by allowedRoutes (kinds and namespaces) and, when
// none is left, says why.
func (d *decider) allowedListeners(route routeView, listeners []*listenerState) ([]*listenerState, string, error) {
	var allowed []*listenerState
	kindServed := false
	for _, st := range listeners {
		if !servesKind(st.supportedKinds, route.kind) {
			continue
		}
		kindServed = true
		ok, err := d.namespaceAllowed(st.listener.AllowedRoutes, st.owner.namespace, route.namespace)
		if err != nil {
			return nil, "", err
		}
		if ok {
			allowed = append(allowed, st)
		}
	}
	if !kindServed {
		if why, unserved := unservedRouteKinds[route.kind]; unserved {
			return nil, why, nil
		}
		return nil, fmt.Sprintf("no selected listener serves %s", route.kind), nil
	}
	if len(allowed) == 0 {
		return nil, fmt.Sprintf("no selected listener allows routes from namespace %s", route.namespace), nil
	}
	return allowed, "", nil
}

func servesKind(kinds []gatewayv1.RouteGroupKind, kind gatewayv1.Kind) bool {
	return slices.ContainsFunc(kinds, func(k gatewayv1.RouteGroupKind) bool { return k.Kind == kind })
}

// namespaceAllowed applies allowedRoutes.namespaces: Same (the default), All, Selector.
func (d *decider) namespaceAllowed(allowed *gatewayv1.AllowedRoutes, gatewayNamespace, routeNamespace string) (bool, error) {
	from := gatewayv1.NamespacesFromSame
	if allowed != nil && allowed.Namespaces != nil && allowed.Namespaces.From != nil {
		from = *allowed.Namespaces.From
	}
	switch from {
	case gatewayv1.NamespacesFromAll:
		return true, nil
	case gatewayv1.NamespacesFromSelector:
		if allowed.Namespaces.Selector == nil {
			return false, nil
		}
		selector, err := metav1.LabelSelectorAsSelector(allowed.Namespaces.Selector)
		if err != nil {
			return false, nil // selects nothing; the listener says why (allowedNamespacesProblem)
		}
		ns, err := d.namespaces.Get(routeNamespace)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("get Namespace %s: %w", routeNamespace, err)
		}
		return selector.Matches(labels.Set(ns.Labels)), nil
	default: // Same, and any value a newer API adds that we do not know
		return gatewayNamespace == routeNamespace, nil
	}
}

func joinNames(names []gatewayv1.SectionName) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	return strings.Join(s, ", ")
}
