package informers

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/backends"
)

// PodConsulServiceIndex is on the injected pods: the Consul service a pod's
// connect-service annotation names, for pods that have one. With it, a change of the
// pods registering under a name finds the Services (and so the routes) of that name.
const PodConsulServiceIndex = "podConsulService"

// injectedPodSelector selects the pods consul-k8s's webhook injected: the only pods
// it registers in Consul, and so the only ones that can rename a backend.
var injectedPodSelector = labels.SelectorFromSet(labels.Set{backends.InjectStatusLabel: backends.Injected}).String()

// newInjectedPodInformer caches the injected pods of every namespace, each trimmed
// to what backend resolution reads (backends.Trim): a pod's spec and status are most
// of its size, and a cluster has many more pods than routes.
func newInjectedPodInformer(kube kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
	informer := coreinformers.NewFilteredPodInformer(kube, metav1.NamespaceAll, resync,
		cache.Indexers{
			cache.NamespaceIndex:  cache.MetaNamespaceIndexFunc,
			PodConsulServiceIndex: IndexPodConsulService,
		},
		func(o *metav1.ListOptions) { o.LabelSelector = injectedPodSelector })
	mustSetTransform(informer, trimPod)
	return informer
}

// mustSetTransform panics on failure: SetTransform fails only on a started informer,
// and these are fresh.
func mustSetTransform(informer cache.SharedIndexInformer, transform cache.TransformFunc) {
	if err := informer.SetTransform(transform); err != nil {
		panic(fmt.Sprintf("informers: set transform: %v", err))
	}
}

// trimPod is the injected pods' transform. A tombstone, or anything not a pod, passes
// through untouched, as in trimMetadata.
func trimPod(obj any) (any, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		return backends.Trim(pod), nil
	}
	return obj, nil
}

// IndexPodConsulService is the index function of PodConsulServiceIndex.
func IndexPodConsulService(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, unexpectedType(PodConsulServiceIndex, obj)
	}
	if name := pod.Annotations[backends.ServiceAnnotation]; name != "" {
		return []string{name}, nil
	}
	return nil, nil
}
