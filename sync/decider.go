package sync

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/listers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewaylisters "sigs.k8s.io/gateway-api/pkg/client/listers/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/backends"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

// decider computes status from cached objects. It reads listers and indexers only: it
// has no clients and writes nothing.
type decider struct {
	controllerName gatewayv1.GatewayController
	caps           consullimits.Capabilities
	verdicts       contract.ConsulVerdicts
	// deployments is nil when this controller does not deploy gateways.
	deployments contract.GatewayDeployments
	// infrastructureKeys are the spec.infrastructure keys the deployed objects get.
	infrastructureKeys gatewayapi.KeyAllowlist

	classes  gatewaylisters.GatewayClassLister
	gateways gatewaylisters.GatewayLister
	// listenerSets is the ListenerSet cache, indexed by
	// informers.ListenerSetParentGatewayIndex; nil judges no ListenerSet.
	listenerSets cache.Indexer
	namespaces   corelisters.NamespaceLister
	services     corelisters.ServiceLister
	// consulServices says which Consul service a backend Service is, and which
	// Services share it.
	consulServices consulServices
	configs        listers.ResourceIndexer[*v1alpha1.GatewayConfig]
	refs           listenerRefs
	// routeIndexers hold each route kind's cache, indexed by
	// informers.RouteParentGatewayIndex.
	routeIndexers map[gatewayv1.Kind]cache.Indexer
	// precedence keeps each listener's precedence model between syncs; nil keeps
	// none.
	precedence *precedenceMemo
}

// ourGateway resolves a parentRef to a Gateway whose class is ours; ok is false for
// parents of any other kind, missing Gateways and other controllers' Gateways.
func (d *decider) ourGateway(ref gatewayv1.ParentReference, routeNamespace string) (*gatewayv1.Gateway, *gatewayv1.GatewayClass, bool, error) {
	if !gatewayapi.IsGateway(ref) {
		return nil, nil, false, nil
	}
	key := gatewayapi.Referent(routeNamespace, ref.Namespace, ref.Name)
	gw, err := d.gateways.Gateways(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("get Gateway %s: %w", key, err)
	}
	class, ok, err := d.ourClass(string(gw.Spec.GatewayClassName))
	return gw, class, ok, err
}

// ourParent resolves a parentRef to a Gateway of ours, or to a ListenerSet whose parent
// is one; ok is false for any other parent.
func (d *decider) ourParent(ref gatewayv1.ParentReference, routeNamespace string) (parentTarget, *gatewayv1.GatewayClass, bool, error) {
	if !gatewayapi.IsListenerSet(ref) {
		gw, class, ok, err := d.ourGateway(ref, routeNamespace)
		return parentTarget{gw: gw}, class, ok, err
	}
	if d.listenerSets == nil {
		return parentTarget{}, nil, false, nil
	}
	key := gatewayapi.Referent(routeNamespace, ref.Namespace, ref.Name)
	obj, exists, err := d.listenerSets.GetByKey(key.String())
	if err != nil {
		return parentTarget{}, nil, false, fmt.Errorf("get ListenerSet %s: %w", key, err)
	}
	if !exists {
		return parentTarget{}, nil, false, nil
	}
	gw, class, ok, err := d.parentGatewayOf(obj.(*gatewayv1.ListenerSet))
	return parentTarget{gw: gw, listenerSet: &key}, class, ok, err
}

// ourClass returns the named GatewayClass when its controllerName is ours.
func (d *decider) ourClass(name string) (*gatewayv1.GatewayClass, bool, error) {
	class, err := d.classes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("get GatewayClass %s: %w", name, err)
	}
	return class, class.Spec.ControllerName == d.controllerName, nil
}

// viewRoute returns the binding view and the rule decision of a cached route object.
func (d *decider) viewRoute(obj any) (routeView, routeRules, error) {
	kind, ok := gatewayapi.RouteOf(obj)
	if !ok {
		return routeView{}, routeRules{}, fmt.Errorf("unexpected route object %T", obj)
	}
	spec, err := kind.Spec(obj)
	if err != nil {
		return routeView{}, routeRules{}, err
	}
	route := obj.(metav1.Object) // every route kind is
	view := routeView{kind: kind.Kind, namespace: route.GetNamespace(), name: route.GetName(), parentRefs: spec.ParentRefs, hostnames: spec.Hostnames}
	rules := routeRules{kind: kind.Kind, caps: d.caps, hostnameProblem: routeHostnamesProblem(spec.Hostnames), count: len(spec.BackendRefs), problems: make([]*ruleProblem, len(spec.BackendRefs))}
	if decide, ok := ruleDecisions[kind.Kind]; ok {
		copy(rules.problems, decide(obj, d.caps))
	}
	for r, refs := range spec.BackendRefs {
		for b, ref := range refs {
			if err := d.checkBackend(&rules, decision.BackendRefIndex{Rule: r, Ref: b}, kind.Kind, view.namespace, ref); err != nil {
				return view, rules, err
			}
		}
	}
	return view, rules, nil
}

// checkBackend records what the backendRef at index of a route resolved to. Every
// backendRef is checked, not only up to the first unresolved one: the others still
// receive traffic, and the Consul translation writes what the decision says of each.
func (d *decider) checkBackend(rules *routeRules, index decision.BackendRefIndex, kind gatewayv1.Kind, namespace string, ref gatewayv1.BackendObjectReference) error {
	resolved, problem, err := resolveBackendRef(kind, namespace, ref, d.services, d.refs.grants, d.consulServices)
	if err != nil {
		return err
	}
	referent := gatewayapi.Referent(namespace, ref.Namespace, ref.Name)
	if problem != nil {
		if rules.backend == nil {
			rules.backend = problem
		}
		rules.backends = append(rules.backends, decision.Backend{Ref: index, Referent: referent})
		return nil
	}
	b := resolved.decided(index, referent, gatewayapi.IsMeshService(ref))
	rules.backends = append(rules.backends, b)
	if b.Narrowed {
		rules.note(fmt.Sprintf("backendRef %s is the Consul service %q, %s: it reaches only the instances of namespace %s", referent, b.Consul, resolved.NarrowedBecause, referent.Namespace))
	}
	if b.Renamed() {
		why := fmt.Sprintf("as its pods' %s annotation says", backends.ServiceAnnotation)
		if b.MeshService {
			why = "as the MeshService's spec.name says"
		}
		rules.note(fmt.Sprintf("backendRef %s is the Consul service %q, %s", referent, b.Consul, why))
	}
	return nil
}

// consulCondition turns a data-plane verdict on a route for one parent into the
// condition that carries it.
func consulCondition(v contract.Verdict, generation int64) metav1.Condition {
	switch {
	case !v.Known:
		return condition(ConsulAcceptedCondition, false, "Pending", "Waiting for Consul to accept the route", generation)
	case v.Programmed:
		return condition(ConsulAcceptedCondition, true, "Accepted", "Consul accepted the route", generation)
	default:
		return condition(ConsulAcceptedCondition, false, v.Reason, v.Message, generation)
	}
}
