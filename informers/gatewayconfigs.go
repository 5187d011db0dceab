package informers

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/client"
	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
)

// newGatewayConfigInformer is the shared informer of the project's own GatewayConfigs,
// in every namespace. One kind needs no generated informer factory: this is what such
// a factory would build.
func newGatewayConfigInformer(configs client.Interface, resync time.Duration) cache.SharedIndexInformer {
	api := configs.GatewayConfigs(metav1.NamespaceAll)
	// A client that cannot stream lists (the fake) says so, as generated clients do.
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
			return api.List(ctx, options)
		},
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			return api.Watch(ctx, options)
		},
	}, configs)
	informer := cache.NewSharedIndexInformer(lw, &v1alpha1.GatewayConfig{}, resync, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := informer.SetTransform(trimMetadata); err != nil {
		panic(err) // only possible once the informer has started
	}
	return informer
}
