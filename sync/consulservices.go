package sync

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/backends"
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
	catalog ConsulServiceNames
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
func newConsulServices(inf Informers, shared bool, catalog ConsulServiceNames) consulServices {
	if catalog == nil {
		catalog = allServicesKnown{}
	}
	c := consulServices{services: inf.Services.Informer().GetIndexer(), pods: inf.InjectedPods.GetIndexer(), shared: shared, catalog: catalog}
	if inf.MeshServices != nil {
		c.meshServices = inf.MeshServices.GetIndexer()
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
	resolution, problem := backends.Resolve(ref, svc, port, pods)
	if problem != nil {
		return resolution, &backendProblem{Reason: gatewayv1.RouteConditionReason(problem.Reason), Message: problem.Message}, nil
	}
	return resolution, nil, nil
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

// otherNamespacesRegister reports whether pods of a namespace other than namespace
// register instances of the Consul service name (see sharing): a route to it must
// then be narrowed to namespace's instances.
func (c consulServices) otherNamespacesRegister(name, namespace string) (bool, error) {
	sharing, err := c.sharing(name)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(sharing, func(svc *corev1.Service) bool { return svc.Namespace != namespace }), nil
}

// namespaceRegisters reports whether pods of namespace register instances of the
// Consul service name.
func (c consulServices) namespaceRegisters(name, namespace string) (bool, error) {
	sharing, err := c.sharing(name)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(sharing, func(svc *corev1.Service) bool { return svc.Namespace == namespace }), nil
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
