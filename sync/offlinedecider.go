package sync

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/listers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewaylisters "sigs.k8s.io/gateway-api/pkg/client/listers/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayconfig"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

// OfflineConfig is what an OfflineDecider judges with: the controller's settings
// that status depends on.
type OfflineConfig struct {
	ControllerName gatewayv1.GatewayController
	Capabilities   consullimits.Capabilities
	BundleVersion  string
	// Now stamps lastTransitionTime.
	Now time.Time
	// SharedConsulNames is --consul-shared-service-names' meaning: Services of one
	// name in several namespaces are one Consul service.
	SharedConsulNames bool
}

// OfflineDecider judges objects with the status workers' own decisions, from caches
// filled with the objects handed in rather than by informers: the read-only commands
// judge a cluster or a directory of YAML with it. What only a live cluster knows is
// absent: Consul's verdicts (Programmed waits for them) and the gateway pods (the
// Gateways are judged as by a controller that does not deploy them). It has no
// clients; Store stands for a confirmed status write.
type OfflineDecider struct {
	decider
	now           metav1.Time
	bundleVersion string
	classStore    cache.Indexer
	gatewayStore  cache.Indexer
}

// NewOfflineDecider fills the caches with objects, indexed as the informers index
// them. objects are typed: GatewayClasses, Gateways, ListenerSets, the routes of
// gatewayapi.Routes, ReferenceGrants, Namespaces, Services, Secrets and
// GatewayConfigs; anything else is an error naming it.
func NewOfflineDecider(cfg OfflineConfig, objects []runtime.Object) (*OfflineDecider, error) {
	store := func(indexers cache.Indexers) cache.Indexer {
		if indexers == nil {
			indexers = cache.Indexers{}
		}
		indexers[cache.NamespaceIndex] = cache.MetaNamespaceIndexFunc
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, indexers)
	}
	o := &OfflineDecider{
		now:           metav1.NewTime(cfg.Now.Truncate(time.Second)),
		bundleVersion: cfg.BundleVersion,
		classStore:    store(informers.GatewayClassIndexers()),
		gatewayStore:  store(informers.GatewayIndexers()),
	}
	listenerSets, namespaces, services := store(informers.ListenerSetIndexers()), store(nil), store(informers.ServiceIndexers())
	secrets, grants, configs := store(nil), store(nil), store(nil)
	pods := store(cache.Indexers{informers.PodConsulServiceIndex: informers.IndexPodConsulService})
	routes := make(map[gatewayv1.Kind]cache.Indexer, len(gatewayapi.Routes))
	for _, kind := range gatewayapi.Routes {
		routes[kind.Kind] = store(informers.RouteIndexers())
	}
	o.decider = decider{
		controllerName:     cfg.ControllerName,
		caps:               cfg.Capabilities,
		verdicts:           noVerdicts{},
		infrastructureKeys: gatewayapi.KeyAllowlist{},
		consulServices:     consulServices{services: services, pods: pods, shared: cfg.SharedConsulNames, catalog: allServicesKnown{}},
		classes:            gatewaylisters.NewGatewayClassLister(o.classStore),
		gateways:           gatewaylisters.NewGatewayLister(o.gatewayStore),
		listenerSets:       listenerSets,
		namespaces:         corelisters.NewNamespaceLister(namespaces),
		services:           corelisters.NewServiceLister(services),
		configs:            listers.New[*v1alpha1.GatewayConfig](configs, v1alpha1.Resource("gatewayconfigs")),
		refs:               listenerRefs{secrets: corelisters.NewSecretLister(secrets), grants: gatewaylisters.NewReferenceGrantLister(grants)},
		routeIndexers:      routes,
	}
	for _, obj := range objects {
		target, ok := o.judgedStore(obj)
		switch obj.(type) {
		case *gatewayv1.ReferenceGrant:
			target, ok = grants, true
		case *corev1.Namespace:
			target, ok = namespaces, true
		case *corev1.Service:
			target, ok = services, true
		case *corev1.Secret:
			target, ok = secrets, true
		case *v1alpha1.GatewayConfig:
			target, ok = configs, true
		}
		if !ok {
			return nil, fmt.Errorf("%s: not a kind the controller reads", describeObject(obj))
		}
		if err := target.Add(obj.DeepCopyObject()); err != nil {
			return nil, fmt.Errorf("%s: %w", describeObject(obj), err)
		}
	}
	return o, nil
}

// ControllerName is the controllerName judged as this controller's.
func (o *OfflineDecider) ControllerName() gatewayv1.GatewayController { return o.controllerName }

// GatewayClasses lists the cached GatewayClasses by name.
func (o *OfflineDecider) GatewayClasses() []*gatewayv1.GatewayClass {
	return sortedObjects[*gatewayv1.GatewayClass](o.classStore)
}

// Gateways lists the cached Gateways by namespace and name.
func (o *OfflineDecider) Gateways() []*gatewayv1.Gateway {
	return sortedObjects[*gatewayv1.Gateway](o.gatewayStore)
}

// ListenerSets lists the cached ListenerSets by namespace and name.
func (o *OfflineDecider) ListenerSets() []*gatewayv1.ListenerSet {
	return sortedObjects[*gatewayv1.ListenerSet](o.listenerSets)
}

// Routes lists the cached routes of kind by namespace and name.
func (o *OfflineDecider) Routes(kind gatewayv1.Kind) []gatewayapi.Object {
	return sortedObjects[gatewayapi.Object](o.routeIndexers[kind])
}

// Store replaces a cached GatewayClass, Gateway, ListenerSet or route by obj, as a
// confirmed status write replaces it in the informers' caches.
func (o *OfflineDecider) Store(obj runtime.Object) error {
	target, ok := o.judgedStore(obj)
	if !ok {
		return fmt.Errorf("%s: no status of it is judged", describeObject(obj))
	}
	return target.Update(obj)
}

// judgedStore is the cache of obj's kind when its status is judged: a GatewayClass, a
// Gateway, a ListenerSet or a route.
func (o *OfflineDecider) judgedStore(obj runtime.Object) (cache.Indexer, bool) {
	switch obj.(type) {
	case *gatewayv1.GatewayClass:
		return o.classStore, true
	case *gatewayv1.Gateway:
		return o.gatewayStore, true
	case *gatewayv1.ListenerSet:
		return o.listenerSets, true
	}
	kind, ok := gatewayapi.RouteOf(obj)
	if !ok {
		return nil, false
	}
	return o.routeIndexers[kind.Kind], true
}

// OurClass returns the GatewayClass called name, and whether this controller is its
// controller.
func (o *OfflineDecider) OurClass(name gatewayv1.ObjectName) (*gatewayv1.GatewayClass, bool, error) {
	return o.ourClass(string(name))
}

// ParentGatewayOf returns a ListenerSet's parent Gateway and its class, and whether
// the Gateway is this controller's.
func (o *OfflineDecider) ParentGatewayOf(set *gatewayv1.ListenerSet) (*gatewayv1.Gateway, *gatewayv1.GatewayClass, bool, error) {
	return o.parentGatewayOf(set)
}

// GatewayClassStatus is the status the workers would write for class.
func (o *OfflineDecider) GatewayClassStatus(class *gatewayv1.GatewayClass) (gatewayv1.GatewayClassStatus, error) {
	params, err := gatewayconfig.OfClass(o.configs, class)
	if err != nil {
		return gatewayv1.GatewayClassStatus{}, err
	}
	return gatewayClassStatus(class, params, o.bundleVersion, o.caps, o.now), nil
}

// GatewayStatus is the status the workers would write for gw, of class.
func (o *OfflineDecider) GatewayStatus(gw *gatewayv1.Gateway, class *gatewayv1.GatewayClass) (gatewayv1.GatewayStatus, error) {
	return o.gatewayStatus(gw, class, o.now)
}

// ListenerSetStatus is the status the workers would write for set, of parent gw.
func (o *OfflineDecider) ListenerSetStatus(set *gatewayv1.ListenerSet, gw *gatewayv1.Gateway, class *gatewayv1.GatewayClass) (gatewayv1.ListenerSetStatus, error) {
	return o.listenerSetStatus(set, gw, class, o.now)
}

// RouteStatus is the status.parents the workers would write for route, and the
// decision they would publish with it.
func (o *OfflineDecider) RouteStatus(route gatewayapi.Object, existing []gatewayv1.RouteParentStatus) ([]gatewayv1.RouteParentStatus, decision.Route, error) {
	view, rules, err := o.viewRoute(route)
	if err != nil {
		return nil, decision.Route{}, err
	}
	return o.routeParentStatuses(view, rules, existing, route.GetGeneration(), o.now)
}

// RouteRulings are the workers' decisions on a route that hold for every parent
// alike: its hostnames, and whether Consul can program each rule.
type RouteRulings struct {
	// HostnameProblem says why the route's hostnames refuse it on every parent.
	HostnameProblem string
	// RuleProblems say, per rule, why Consul cannot program it (it is dropped); ""
	// for a rule it can.
	RuleProblems []string
}

// RouteRulings decides on route's hostnames and rules as the workers do.
func (o *OfflineDecider) RouteRulings(route runtime.Object) (RouteRulings, error) {
	_, rules, err := o.viewRoute(route)
	if err != nil {
		return RouteRulings{}, err
	}
	out := RouteRulings{HostnameProblem: rules.hostnameProblem, RuleProblems: make([]string, len(rules.problems))}
	for r, p := range rules.problems {
		if p != nil {
			out.RuleProblems[r] = p.Message
		}
	}
	return out, nil
}

// ResolvedBackend is the workers' decision on one backendRef.
type ResolvedBackend struct {
	// ConsulService is the Consul service the backendRef resolves to (before any
	// prefix or namespace placement); empty when it does not resolve.
	ConsulService string
	// OnlyNamespace: pods of other namespaces register the Consul service too, and
	// the backendRef reaches only the instances of its referent's namespace.
	OnlyNamespace bool
	// Problem says why it does not resolve.
	Problem string
}

// ResolveBackendRef decides on one backendRef of a route of kind in namespace as the
// workers do.
func (o *OfflineDecider) ResolveBackendRef(kind gatewayv1.Kind, namespace string, ref gatewayv1.BackendObjectReference) (ResolvedBackend, error) {
	resolved, problem, err := resolveBackendRef(kind, namespace, ref, o.services, o.refs.grants, o.consulServices)
	if err != nil {
		return ResolvedBackend{}, err
	}
	b := ResolvedBackend{ConsulService: resolved.Service, OnlyNamespace: resolved.Narrowed}
	if problem != nil {
		b.ConsulService, b.Problem = "", problem.Message
	}
	return b, nil
}

// Withheld reports whether a confirmed object must not reach the syncers: its
// Confirmation carries no object (a Gateway asking for TLS Consul cannot honour).
func Withheld(obj runtime.Object) bool { return withheld(obj) }

// sortedObjects lists indexer's objects of type T by namespace and name, so that
// judging and its output do not depend on map order.
func sortedObjects[T runtime.Object](indexer cache.Indexer) []T {
	keys := indexer.ListKeys()
	slices.Sort(keys)
	out := make([]T, 0, len(keys))
	for _, key := range keys {
		obj, ok, _ := indexer.GetByKey(key)
		if t, isT := obj.(T); ok && isT {
			out = append(out, t)
		}
	}
	return out
}

// describeObject names obj for an error: its kind, namespace and name.
func describeObject(obj runtime.Object) string {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if kind == "" {
		kind = strings.TrimPrefix(fmt.Sprintf("%T", obj), "*")
	}
	if m, err := meta.Accessor(obj); err == nil {
		return fmt.Sprintf("%s %s", kind, cache.MetaObjectToName(m))
	}
	return kind
}
