package sync

import (
	"fmt"
	"slices"
	"strings"
	gosync "sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/backends"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
)

// consulServices says which Consul service a backend Service is, from the cached pods
// consul-k8s injected (package backends decides), and which Services share a Consul
// service when Consul names are not placed by namespace.
type consulServices struct {
	// services is the Service cache, with informers.ServiceNameIndex.
	services cache.Indexer
	// pods is the injected pod cache, with informers.PodConsulServiceIndex; nil when
	// none is cached, and every Service is the Consul service of its own name.
	pods cache.Indexer
	// shared: Consul knows the Services of one name in every namespace as one service
	// (no namespace mirroring).
	shared bool
	// meshServices is the MeshService cache (unstructured); nil when the CRD is not
	// served.
	meshServices cache.Indexer
	// catalog says which services Consul's catalog holds.
	catalog contract.ConsulServiceNames
	// memo keeps sharing's answers until a Service or injected pod changes; nil
	// keeps none.
	memo *sharingMemo
	// endpointSlices is the EndpointSlice cache, with
	// informers.EndpointSliceServiceIndex; nil when none is cached, and a Service
	// without a selector is the Consul service of its own name.
	endpointSlices cache.Indexer
}

// sharingMemo keeps, per Consul service name, the Services that share it, as of one
// version of the Service and pod caches. Every Service or injected pod event makes a
// new version (invalidate), before the event's routes are queued; so a route judged
// for that event never reads an answer from before it. A pod event re-judges every
// route naming a Service of the pod's name, and each would otherwise list the
// Services and pods of every namespace registering it again.
type sharingMemo struct {
	version atomic.Uint64
	mu      gosync.Mutex
	byName  map[string]sharingAnswer
}

type sharingAnswer struct {
	version  uint64
	services []*corev1.Service
}

// sharingMemoLimit bounds the names kept; past it the memo starts over.
const sharingMemoLimit = 4096

func newSharingMemo() *sharingMemo { return &sharingMemo{byName: map[string]sharingAnswer{}} }

// invalidate starts a new version: every answer kept is stale.
func (m *sharingMemo) invalidate() { m.version.Add(1) }

// get returns the answer for name computed at version, if kept.
func (m *sharingMemo) get(name string, version uint64) ([]*corev1.Service, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.byName[name]
	return a.services, ok && a.version == version
}

// put keeps an answer computed from caches read at version or later.
func (m *sharingMemo) put(name string, version uint64, services []*corev1.Service) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.byName) >= sharingMemoLimit {
		clear(m.byName)
	}
	m.byName[name] = sharingAnswer{version: version, services: services}
}

// invalidating is handler with the memo invalidated before each event.
func invalidating(m *sharingMemo, handler cache.ResourceEventHandler) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			m.invalidate()
			handler.OnAdd(obj, isInInitialList)
		},
		UpdateFunc: func(oldObj, newObj any) {
			m.invalidate()
			handler.OnUpdate(oldObj, newObj)
		},
		DeleteFunc: func(obj any) {
			m.invalidate()
			handler.OnDelete(obj)
		},
	}
}

// meshServiceSpec is what the controller reads of a MeshService.
type meshServiceSpec struct{ name, peer string }

// meshService returns the spec of the cached MeshService key; found is false when
// there is none.
func (c consulServices) meshService(key cache.ObjectName) (meshServiceSpec, bool, error) {
	obj, found, err := c.meshServices.GetByKey(key.String())
	if err != nil || !found {
		return meshServiceSpec{}, false, err
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return meshServiceSpec{}, false, fmt.Errorf("MeshService %s: unexpected %T in the cache", key, obj)
	}
	name, _, _ := unstructured.NestedString(u.Object, "spec", "name")
	peer, _, _ := unstructured.NestedString(u.Object, "spec", "peer")
	return meshServiceSpec{name: name, peer: peer}, true, nil
}

// newConsulServices reads the caches of inf.
func newConsulServices(inf Informers, shared bool, catalog contract.ConsulServiceNames) consulServices {
	if catalog == nil {
		catalog = allServicesKnown{}
	}
	c := consulServices{services: inf.Services.Informer().GetIndexer(), pods: inf.InjectedPods.GetIndexer(), shared: shared, catalog: catalog, memo: newSharingMemo()}
	if inf.MeshServices != nil {
		c.meshServices = inf.MeshServices.GetIndexer()
	}
	if inf.EndpointSlices != nil {
		c.endpointSlices = inf.EndpointSlices.GetIndexer()
	}
	return c
}

// resolve returns the Consul service svc is, port being the Service port a backendRef
// names; ref names the backendRef in messages.
func (c consulServices) resolve(ref string, svc *corev1.Service, port *corev1.ServicePort) (backends.Resolution, *backendProblem, error) {
	pods, err := c.podsIn(svc.Namespace)
	if err != nil {
		return backends.Resolution{}, nil, err
	}
	var resolution backends.Resolution
	var problem *backends.Problem
	if len(svc.Spec.Selector) == 0 && c.endpointSlices != nil {
		resolution, problem, err = c.resolveEndpoints(ref, svc, port, pods)
		if err != nil {
			return backends.Resolution{}, nil, err
		}
	} else {
		resolution, problem = backends.Resolve(ref, svc, port, pods)
	}
	if problem != nil {
		return resolution, &backendProblem{Reason: gatewayv1.RouteConditionReason(problem.Reason), Message: problem.Message}, nil
	}
	return resolution, nil, nil
}

// resolveEndpoints resolves a Service without a selector through its cached
// EndpointSlices (backends.ResolveEndpoints).
func (c consulServices) resolveEndpoints(ref string, svc *corev1.Service, port *corev1.ServicePort, pods []*corev1.Pod) (backends.Resolution, *backends.Problem, error) {
	key := cache.MetaObjectToName(svc).String()
	sliceObjs, err := c.endpointSlices.ByIndex(informers.EndpointSliceServiceIndex, key)
	if err != nil {
		return backends.Resolution{}, nil, fmt.Errorf("list EndpointSlices of Service %s: %w", key, err)
	}
	endpointSlices := make([]*discoveryv1.EndpointSlice, 0, len(sliceObjs))
	for _, obj := range sliceObjs {
		if slice, ok := obj.(*discoveryv1.EndpointSlice); ok {
			endpointSlices = append(endpointSlices, slice)
		}
	}
	// Slices in name order: the first problem found is the one reported, every time.
	slices.SortFunc(endpointSlices, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	serviceObjs, err := c.services.ByIndex(cache.NamespaceIndex, svc.Namespace)
	if err != nil {
		return backends.Resolution{}, nil, fmt.Errorf("list Services of namespace %s: %w", svc.Namespace, err)
	}
	services := make([]*corev1.Service, 0, len(serviceObjs))
	for _, obj := range serviceObjs {
		if s, ok := obj.(*corev1.Service); ok {
			services = append(services, s)
		}
	}
	resolution, problem := backends.ResolveEndpoints(ref, svc, port, endpointSlices, services, pods)
	return resolution, problem, nil
}

// sharing returns the Services of every namespace that put instances into the Consul
// service name: those with registered pods (package backends) that register under it,
// whether by the Service's name or by their annotation. A Service that registers no
// pod (empty, ignored, without a selector, or whose pods are elsewhere) is not one:
// consul-k8s puts no instance into Consul for it. nil when names are not shared.
func (c consulServices) sharing(name string) ([]*corev1.Service, error) {
	if !c.shared {
		return nil, nil
	}
	if c.memo == nil {
		return c.listSharing(name)
	}
	version := c.memo.version.Load()
	if services, ok := c.memo.get(name, version); ok {
		return services, nil
	}
	services, err := c.listSharing(name)
	if err == nil {
		c.memo.put(name, version, services)
	}
	return services, err
}

// listSharing is sharing read from the caches.
func (c consulServices) listSharing(name string) ([]*corev1.Service, error) {
	candidates, err := c.servicesNamed(name)
	if err != nil {
		return nil, err
	}
	namespaces, err := c.namespacesRegistering(name)
	if err != nil {
		return nil, err
	}
	for _, ns := range namespaces {
		objs, err := c.services.ByIndex(cache.NamespaceIndex, ns)
		if err != nil {
			return nil, fmt.Errorf("list Services of namespace %s: %w", ns, err)
		}
		for _, obj := range objs {
			if svc, ok := obj.(*corev1.Service); ok && !slices.Contains(candidates, svc) {
				candidates = append(candidates, svc)
			}
		}
	}
	out := []*corev1.Service{}
	for _, svc := range candidates {
		pods, err := c.podsIn(svc.Namespace)
		if err != nil {
			return nil, err
		}
		if slices.Contains(backends.ConsulNames(svc, pods), name) {
			out = append(out, svc)
		}
	}
	return out, nil
}

// registering says whose pods register instances of the Consul service name (see
// sharing): namespace's own, and those of other namespaces, which make a route to it
// narrowed to namespace's instances.
func (c consulServices) registering(name, namespace string) (own, others bool, err error) {
	sharing, err := c.sharing(name)
	for _, svc := range sharing {
		own = own || svc.Namespace == namespace
		others = others || svc.Namespace != namespace
	}
	return own, others, err
}

// servicesNamed returns the Services called name in every namespace.
func (c consulServices) servicesNamed(name string) ([]*corev1.Service, error) {
	objs, err := c.services.ByIndex(informers.ServiceNameIndex, name)
	if err != nil {
		return nil, fmt.Errorf("find Services named %s: %w", name, err)
	}
	return typed[*corev1.Service](objs), nil
}

// namespacesRegistering returns the namespaces with an injected pod annotated with
// the Consul service name, sorted.
func (c consulServices) namespacesRegistering(name string) ([]string, error) {
	if c.pods == nil {
		return nil, nil
	}
	objs, err := c.pods.ByIndex(informers.PodConsulServiceIndex, name)
	if err != nil {
		return nil, fmt.Errorf("find pods registering as %s: %w", name, err)
	}
	var namespaces []string
	for _, pod := range typed[*corev1.Pod](objs) {
		if !slices.Contains(namespaces, pod.Namespace) {
			namespaces = append(namespaces, pod.Namespace)
		}
	}
	slices.Sort(namespaces)
	return namespaces, nil
}

// podsIn returns the cached injected pods of namespace.
func (c consulServices) podsIn(namespace string) ([]*corev1.Pod, error) {
	if c.pods == nil {
		return nil, nil
	}
	objs, err := c.pods.ByIndex(cache.NamespaceIndex, namespace)
	if err != nil {
		return nil, fmt.Errorf("list injected pods of namespace %s: %w", namespace, err)
	}
	return typed[*corev1.Pod](objs), nil
}

// typed keeps the objects of type T.
func typed[T any](objs []any) []T {
	out := make([]T, 0, len(objs))
	for _, obj := range objs {
		if t, ok := obj.(T); ok {
			out = append(out, t)
		}
	}
	return out
}
