package sync

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
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
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
)

// OfflineConfig is what Offline judges with: the controller's settings that status
// depends on.
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

// maxOfflinePasses bounds the judging rounds: a status feeds others (a Gateway's
// Accepted its routes', the routes' attachment the Gateway's attachedRoutes), and a
// cluster of objects settles in three; more means the decisions do not converge, a
// bug worth an error rather than a loop.
const maxOfflinePasses = 8

// Offline judges objects as the status workers judge them from their caches, without
// an API server: each status the workers would write is stored as if the server had
// confirmed it, and every object is judged again until nothing changes. The decisions
// are the workers' own (the same decider). What only a live cluster knows is absent:
// Consul's verdicts (Programmed waits for them) and the gateway pods (the Gateways are
// judged as by a controller that does not deploy them). It has no clients.
//
// objects are typed: GatewayClasses, Gateways, ListenerSets, the routes of
// gatewayapi.Routes, ReferenceGrants, Namespaces, Services, Secrets and
// GatewayConfigs; anything else is an error naming it.
func Offline(cfg OfflineConfig, objects []runtime.Object) ([]contract.Confirmation, error) {
	o, err := newOffline(cfg, objects)
	if err != nil {
		return nil, err
	}
	for range maxOfflinePasses {
		changed, err := o.pass()
		if err != nil {
			return nil, err
		}
		if !changed {
			return o.confirmations(), nil
		}
	}
	return nil, fmt.Errorf("the statuses did not settle in %d rounds of judging", maxOfflinePasses)
}

type offline struct {
	decider
	now           metav1.Time
	bundleVersion string
	classStore    cache.Indexer
	gatewayStore  cache.Indexer
	decisions     map[objectKey]RouteDecision
}

func newOffline(cfg OfflineConfig, objects []runtime.Object) (*offline, error) {
	store := func(indexers cache.Indexers) cache.Indexer {
		if indexers == nil {
			indexers = cache.Indexers{}
		}
		indexers[cache.NamespaceIndex] = cache.MetaNamespaceIndexFunc
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, indexers)
	}
	o := &offline{
		now:           metav1.NewTime(cfg.Now.Truncate(time.Second)),
		bundleVersion: cfg.BundleVersion,
		classStore:    store(informers.GatewayClassIndexers()),
		gatewayStore:  store(informers.GatewayIndexers()),
		decisions:     map[objectKey]RouteDecision{},
	}
	listenerSets, namespaces, services := store(informers.ListenerSetIndexers()), store(nil), store(informers.ServiceIndexers())
	secrets, grants, configs := store(nil), store(nil), store(nil)
	pods := store(cache.Indexers{informers.PodConsulServiceIndex: informers.IndexPodConsulService})
	routes := make(map[gatewayv1.Kind]cache.Indexer, len(gatewayapi.Routes))
	for _, kind := range gatewayapi.Routes {
		routes[kind.Kind] = store(informers.RouteIndexers())
	}
	for _, obj := range objects {
		var target cache.Indexer
		switch obj.(type) {
		case *gatewayv1.GatewayClass:
			target = o.classStore
		case *gatewayv1.Gateway:
			target = o.gatewayStore
		case *gatewayv1.ListenerSet:
			target = listenerSets
		case *gatewayv1.ReferenceGrant:
			target = grants
		case *corev1.Namespace:
			target = namespaces
		case *corev1.Service:
			target = services
		case *corev1.Secret:
			target = secrets
		case *v1alpha1.GatewayConfig:
			target = configs
		default:
			kind, ok := gatewayapi.RouteOf(obj)
			if !ok {
				return nil, fmt.Errorf("%s: not a kind the controller reads", describeObject(obj))
			}
			target = routes[kind.Kind]
		}
		if err := target.Add(obj.DeepCopyObject()); err != nil {
			return nil, fmt.Errorf("%s: %w", describeObject(obj), err)
		}
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
	return o, nil
}

// pass judges every object once, in the workers' order of dependence, storing each
// changed status; it reports whether any changed.
func (o *offline) pass() (bool, error) {
	changed := false
	for _, class := range sortedObjects[*gatewayv1.GatewayClass](o.classStore) {
		if class.Spec.ControllerName != o.controllerName {
			continue
		}
		params, err := gatewayconfig.OfClass(o.configs, class)
		if err != nil {
			return false, err
		}
		status := gatewayClassStatus(class, params, o.bundleVersion, o.caps, o.now)
		c, err := storeStatus(o.classStore, class, apiequality.Semantic.DeepEqual(status, class.Status), func(u *gatewayv1.GatewayClass) { u.Status = status })
		if err != nil {
			return false, err
		}
		changed = changed || c
	}
	for _, gw := range sortedObjects[*gatewayv1.Gateway](o.gatewayStore) {
		class, ours, err := o.ourClass(string(gw.Spec.GatewayClassName))
		if err != nil {
			return false, err
		}
		if !ours {
			continue
		}
		status, err := o.gatewayStatus(gw, class, o.now)
		if err != nil {
			return false, fmt.Errorf("judge Gateway %s/%s: %w", gw.Namespace, gw.Name, err)
		}
		c, err := storeStatus(o.gatewayStore, gw, apiequality.Semantic.DeepEqual(status, gw.Status), func(u *gatewayv1.Gateway) { u.Status = status })
		if err != nil {
			return false, err
		}
		changed = changed || c
	}
	for _, set := range sortedObjects[*gatewayv1.ListenerSet](o.listenerSets) {
		gw, class, ours, err := o.parentGatewayOf(set)
		if err != nil {
			return false, err
		}
		if !ours {
			continue
		}
		status, err := o.listenerSetStatus(set, gw, class, o.now)
		if err != nil {
			return false, fmt.Errorf("judge ListenerSet %s/%s: %w", set.Namespace, set.Name, err)
		}
		c, err := storeStatus(o.listenerSets, set, apiequality.Semantic.DeepEqual(status, set.Status), func(u *gatewayv1.ListenerSet) { u.Status = status })
		if err != nil {
			return false, err
		}
		changed = changed || c
	}
	for _, kind := range gatewayapi.Routes {
		c, err := o.judgeRoutes(kind)
		if err != nil {
			return false, err
		}
		changed = changed || c
	}
	return changed, nil
}

func (o *offline) judgeRoutes(kind gatewayapi.RouteKind) (bool, error) {
	changed := false
	indexer := o.routeIndexers[kind.Kind]
	for _, r := range sortedObjects[gatewayapi.Object](indexer) {
		existing := kind.Parents(r)
		view, rules, err := o.viewRoute(r)
		if err != nil {
			return false, fmt.Errorf("%s %s/%s: %w", kind.Kind, r.GetNamespace(), r.GetName(), err)
		}
		parents, decision, err := o.routeParentStatuses(view, rules, existing, r.GetGeneration(), o.now)
		if err != nil {
			return false, fmt.Errorf("%s %s/%s: %w", kind.Kind, r.GetNamespace(), r.GetName(), err)
		}
		if !o.hasOurParent(parents) && !o.hasOurParent(existing) {
			continue
		}
		o.decisions[objectKey{kind.Kind, cache.MetaObjectToName(r)}] = decision
		if apiequality.Semantic.DeepEqual(parents, existing) {
			continue
		}
		update, err := kind.WithParents(r, parents)
		if err != nil {
			return false, err
		}
		if err := indexer.Update(update); err != nil {
			return false, err
		}
		changed = true
	}
	return changed, nil
}

func (o *offline) hasOurParent(parents []gatewayv1.RouteParentStatus) bool {
	return slices.ContainsFunc(parents, func(p gatewayv1.RouteParentStatus) bool { return p.ControllerName == o.controllerName })
}

// storeStatus replaces obj in indexer by a copy with its status set, unless it is
// unchanged, as a confirmed status write would; it reports whether it replaced it.
func storeStatus[T runtime.Object](indexer cache.Indexer, obj T, unchanged bool, set func(T)) (bool, error) {
	if unchanged {
		return false, nil
	}
	update := obj.DeepCopyObject().(T)
	set(update)
	return true, indexer.Update(update)
}

// confirmations are what the status workers would publish once every status is
// confirmed: each object of ours with its status, each route with its decision, and
// nothing for an object withheld from the syncers.
func (o *offline) confirmations() []contract.Confirmation {
	var out []contract.Confirmation
	add := func(kind gatewayv1.Kind, obj runtime.Object, route *RouteDecision) {
		conf := contract.Confirmation{Kind: kind, Key: objectName(obj), Object: obj, Route: route}
		if withheld(obj) {
			conf.Object, conf.Route = nil, nil
		}
		out = append(out, conf)
	}
	for _, class := range sortedObjects[*gatewayv1.GatewayClass](o.classStore) {
		if class.Spec.ControllerName == o.controllerName {
			add(gatewayapi.GatewayClassKind, class, nil)
		}
	}
	for _, gw := range sortedObjects[*gatewayv1.Gateway](o.gatewayStore) {
		if _, ours, _ := o.ourClass(string(gw.Spec.GatewayClassName)); ours {
			add(gatewayapi.GatewayKind, gw, nil)
		}
	}
	for _, set := range sortedObjects[*gatewayv1.ListenerSet](o.listenerSets) {
		if _, _, ours, _ := o.parentGatewayOf(set); ours {
			add(gatewayapi.ListenerSetKind, set, nil)
		}
	}
	for _, kind := range gatewayapi.Routes {
		for _, r := range sortedObjects[gatewayapi.Object](o.routeIndexers[kind.Kind]) {
			if decision, ok := o.decisions[objectKey{kind.Kind, cache.MetaObjectToName(r)}]; ok {
				add(kind.Kind, r, &decision)
			}
		}
	}
	return out
}

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
