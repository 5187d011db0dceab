package sync

import (
	"fmt"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

// routeParentStatuses computes the route's status.parents: other controllers' entries
// exactly as they are, then one entry of ours per parentRef that names one of our
// Gateways. Our entries for parentRefs that are gone are dropped.
func (d *decider) routeParentStatuses(route routeView, rules routeRules, existing []gatewayv1.RouteParentStatus, generation int64, now metav1.Time) ([]gatewayv1.RouteParentStatus, decision.Route, error) {
	out := decision.Route{DroppedRules: rules.dropped(), Backends: rules.backends}
	parents := make([]gatewayv1.RouteParentStatus, 0, len(existing))
	for _, p := range existing {
		if p.ControllerName != d.controllerName {
			parents = append(parents, p)
		}
	}
	verdicts := map[cache.ObjectName]gatewayVerdict{}
	routeKey := cache.ObjectName{Namespace: route.namespace, Name: route.name}
	routeVerdict := d.verdicts.Verdict(route.kind, routeKey)
	for _, ref := range route.parentRefs {
		target, class, ok, err := d.ourParent(ref, route.namespace)
		if err != nil || !ok {
			if err != nil {
				return nil, out, err
			}
			continue
		}
		gw := target.gw
		key := cache.MetaObjectToName(gw)
		v, seen := verdicts[key]
		if !seen {
			if v, err = d.evaluateGateway(gw, class); err != nil {
				return nil, out, err
			}
			verdicts[key] = v
		}
		b, err := d.bindParent(route, ref, target, v)
		if err != nil {
			return nil, out, err
		}
		if b, err = d.tcpListenersServed(route, target, v, b); err != nil {
			return nil, out, err
		}
		if b.served() && !rules.refused() {
			out.Attachments = append(out.Attachments, decision.Attachment{Gateway: key, Listeners: b.programmableListeners})
		}
		verdict := parentVerdict(routeVerdict, d.bindings(route.kind, routeKey, key, b))
		if b.accepted && !b.served() {
			verdict = notServedVerdict(b, route.namespace)
		}
		conds := rules.parentConditions(b, verdict, generation)
		routed, ok, err := d.routedAsSpecified(route, target, v, b, generation)
		if err != nil {
			return nil, out, err
		}
		if ok && !rules.refused() {
			conds = append(conds, routed)
		}
		previous := d.ourParentStatus(existing, ref)
		parents = append(parents, gatewayv1.RouteParentStatus{
			ParentRef:      ref,
			ControllerName: d.controllerName,
			Conditions:     mergeConditions(previous, conds, now),
		})
	}
	return parents, out, nil
}

// notServedVerdict is the verdict on a parent whose Gateway or attached listeners
// cannot be programmed: nothing is written to Consul for it, so Consul never judges
// it, and waiting for that would say Pending forever.
func notServedVerdict(b parentBinding, namespace string) contract.Verdict {
	if b.unservable != "" {
		return contract.Verdict{Known: true, Reason: ReasonNotExpressible, Message: "not served: " + b.unservable}
	}
	if len(b.servedOlder) > 0 {
		served := make([]string, len(b.servedOlder))
		for i, o := range b.servedOlder {
			served[i] = fmt.Sprintf("listener %s serves %s", o.listener, describeRoute(gatewayapi.TCPRouteKind, o.route, namespace))
		}
		return contract.Verdict{Known: true, Reason: ReasonOlderRouteServed, Message: "not served: " + strings.Join(served, "; ") +
			". The Gateway API gives a TCP listener's connections to its oldest route (then the first by namespace/name), and the controller writes that route alone: Consul 1.15 serves no listener at all with two tcp-routes bound to it"}
	}
	return contract.Verdict{Known: true, Reason: ReasonListenersNotValid,
		Message: fmt.Sprintf("not served: the listeners the route attaches to (%s) are not valid, see the Gateway's listener status", joinNames(b.listeners))}
}

// bindings are the data plane's verdicts on serving the route on the listeners of
// gateway it is written to.
func (d *decider) bindings(kind gatewayv1.Kind, route, gateway cache.ObjectName, b parentBinding) []contract.Binding {
	out := make([]contract.Binding, len(b.programmableListeners))
	for i, l := range b.programmableListeners {
		out[i] = d.verdicts.Binding(kind, route, gateway, l, b.consulListeners[i])
	}
	return out
}

// parentVerdict is the verdict on a route for one parent: the route's own verdict,
// narrowed by the bindings on the parent's listeners. A refusal on any listener the
// route should be served on makes the parent refused. A pending binding leaves the
// parent unknown, with the same Pending condition as before the data plane answered:
// a step that changes nothing in status costs no status write (a new route passes
// through one in Consul 1.15), and when it lasts, the Gateway's status says why. A
// listener the data plane said nothing about follows the route's verdict, as the
// route's verdict itself stands until the data plane judges a new version of the
// route.
func parentVerdict(route contract.Verdict, bindings []contract.Binding) contract.Verdict {
	if !route.Known || !route.Programmed {
		return route
	}
	var refused []contract.Binding
	pending := false
	for _, b := range bindings {
		switch b.State {
		case contract.BindingRefused:
			refused = append(refused, b)
		case contract.BindingPending:
			pending = true
		}
	}
	switch {
	case len(refused) > 0:
		return contract.Verdict{Known: true, Reason: refused[0].Reason, Message: refusalMessages(refused)}
	case pending:
		return contract.Verdict{}
	default:
		return route
	}
}

func refusalMessages(bindings []contract.Binding) string {
	msgs := make([]string, len(bindings))
	for i, b := range bindings {
		msgs[i] = b.Message
	}
	return strings.Join(msgs, "; ")
}

func (d *decider) ourParentStatus(existing []gatewayv1.RouteParentStatus, ref gatewayv1.ParentReference) []metav1.Condition {
	for _, p := range existing {
		if p.ControllerName == d.controllerName && apiequality.Semantic.DeepEqual(p.ParentRef, ref) {
			return p.Conditions
		}
	}
	return nil
}

// tcpListenersServed keeps, of the listeners a TCPRoute is served on, those where it is
// the oldest TCPRoute served: the spec gives a TCP listener's connections to that
// route, and Consul 1.15 serves a listener with two tcp-routes bound to it no
// connection at all (the gateway gets no listener on the port). The listeners given
// up are recorded with the older route. Other kinds are returned as they are.
func (d *decider) tcpListenersServed(route routeView, target parentTarget, v gatewayVerdict, b parentBinding) (parentBinding, error) {
	if route.kind != gatewayapi.TCPRouteKind || !b.served() {
		return b, nil
	}
	models, err := d.listenerModels(route.kind, target, v)
	if err != nil {
		return b, err
	}
	self := cache.ObjectName{Namespace: route.namespace, Name: route.name}
	kept := b
	kept.programmableListeners, kept.consulListeners = nil, nil
	for i, l := range b.programmableListeners {
		if m, ok := models[l]; ok && m.indexOf(self) >= 0 {
			if oldest := m.table.routes[m.table.oldest()].key; oldest != self {
				kept.servedOlder = append(kept.servedOlder, olderRoute{listener: m.table.name, route: oldest})
				continue
			}
		}
		kept.programmableListeners = append(kept.programmableListeners, l)
		kept.consulListeners = append(kept.consulListeners, b.consulListeners[i])
	}
	return kept, nil
}

// describeRoute names a route of kind to the author of a route in namespace: one of
// another namespace is not named (docs/status.md).
func describeRoute(kind gatewayv1.Kind, key cache.ObjectName, namespace string) string {
	if key.Namespace != namespace {
		return fmt.Sprintf("another namespace's %s", kind)
	}
	return fmt.Sprintf("%s %s", kind, key)
}
