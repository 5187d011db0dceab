package informers

import (
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/backends"
)

// The indexes of the EndpointSlice cache.
const (
	// EndpointSliceServiceIndex is the Service a slice belongs to, "namespace/name":
	// how a Service without a selector finds its endpoints.
	EndpointSliceServiceIndex = "endpointSliceService"
	// EndpointSlicePodIndex is each pod a slice's endpoints point at,
	// "namespace/name": how a pod's change finds the Services it is an endpoint of.
	EndpointSlicePodIndex = "endpointSlicePod"
)

// endpointSliceSelector selects the EndpointSlices of a Service that Kubernetes'
// EndpointSlice controller does not make from a selector: a Service without a
// selector has only such slices, and a Service with one resolves through its selector
// (package backends). Clusters have a slice or more per Service; this keeps the cache
// to the few written by hand or mirrored from hand-made Endpoints.
var endpointSliceSelector = discoveryv1.LabelManagedBy + "!=" + backends.EndpointSliceManagedByController + "," + discoveryv1.LabelServiceName

// newEndpointSliceInformer caches the EndpointSlices endpointSliceSelector selects, of
// every namespace.
func newEndpointSliceInformer(kube kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
	informer := discoveryinformers.NewFilteredEndpointSliceInformer(kube, metav1.NamespaceAll, resync,
		cache.Indexers{
			cache.NamespaceIndex:      cache.MetaNamespaceIndexFunc,
			EndpointSliceServiceIndex: indexEndpointSliceService,
			EndpointSlicePodIndex:     indexEndpointSlicePods,
		},
		func(o *metav1.ListOptions) { o.LabelSelector = endpointSliceSelector })
	mustSetTransform(informer, trimMetadata)
	return informer
}

func indexEndpointSliceService(obj any) ([]string, error) {
	slice, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, unexpectedType(EndpointSliceServiceIndex, obj)
	}
	name := slice.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return nil, nil
	}
	return []string{cache.NewObjectName(slice.Namespace, name).String()}, nil
}

func indexEndpointSlicePods(obj any) ([]string, error) {
	slice, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, unexpectedType(EndpointSlicePodIndex, obj)
	}
	var pods []string
	for _, ep := range slice.Endpoints {
		if ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" {
			continue
		}
		ns := ep.TargetRef.Namespace
		if ns == "" {
			ns = slice.Namespace
		}
		pods = append(pods, cache.NewObjectName(ns, ep.TargetRef.Name).String())
	}
	return pods, nil
}

// EndpointSliceHandler is the handler of EndpointSlice events: it enqueues the routes
// with the slice's Service as a backend.
func (m *KeyMapper) EndpointSliceHandler() cache.ResourceEventHandler {
	return m.forEachObject(m.endpointSliceChanged)
}

func (m *KeyMapper) endpointSliceChanged(obj any) {
	slice, err := objectAs[*discoveryv1.EndpointSlice](obj)
	if err != nil {
		m.reportUnmapped(err, obj)
		return
	}
	if name := slice.Labels[discoveryv1.LabelServiceName]; name != "" {
		m.enqueueRoutesIndexed(routeBackendServiceNameIndex, name)
	}
}

// endpointServicesOf enqueues the routes of the Services whose cached EndpointSlices
// point at the pod key: a pod's name or port there decides their Consul service.
func (m *KeyMapper) endpointServicesOf(key cache.ObjectName) {
	if m.slices == nil {
		return
	}
	objs, err := m.slices.ByIndex(EndpointSlicePodIndex, key.String())
	if err != nil {
		m.logger.Error(err, "Cannot list the EndpointSlices of a pod", "pod", key)
		return
	}
	for _, obj := range objs {
		m.endpointSliceChanged(obj)
	}
}
