package informers

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// A standby replica's caches can lag the API server: its watches may be backing off or
// relisting when it takes the lease. The status pipeline confirms a cached object whose
// stored status already equals the computed one without writing it, and the Consul
// syncer writes what is confirmed; from a lagging cache, a new leader would write an
// older spec into Consul than the one the previous leader wrote. So a leader first waits
// until its caches hold at least what the API server held after it took the lease.

// ConsistentCache is a cache and the resource it caches, which a consistent list reads.
// The informer must cache every object of the resource, in every namespace and without
// a selector: the list it is compared with is of them all.
type ConsistentCache struct {
	Resource schema.GroupVersionResource
	Informer cache.SharedIndexInformer
}

// ConsistentCaches are the caches whose objects the writers act on without reading
// them back: those with a status the pipeline confirms from the cache, and the
// references their translation reads. The listener Secrets are left out: they are
// watched one by one, and an older certificate is replaced as soon as the watch
// delivers the newer one.
func (i *Informers) ConsistentCaches() []ConsistentCache {
	gatewayV1 := schema.GroupVersion{Group: gatewayv1.GroupName, Version: "v1"}
	v1 := func(resource string) schema.GroupVersionResource { return gatewayV1.WithResource(resource) }
	caches := []ConsistentCache{
		{v1("gatewayclasses"), i.GatewayClasses.Informer()},
		{v1("gateways"), i.Gateways.Informer()},
		{v1("listenersets"), i.ListenerSets.Informer()},
		{v1("referencegrants"), i.ReferenceGrants.Informer()},
		{schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, i.Namespaces.Informer()},
		{schema.GroupVersionResource{Version: "v1", Resource: "services"}, i.Services.Informer()},
		{v1alpha1.SchemeGroupVersion.WithResource("gatewayconfigs"), i.GatewayConfigs},
	}
	for _, kind := range gatewayapi.Routes {
		plural, _ := meta.UnsafeGuessKindToResource(gatewayV1.WithKind(string(kind.Kind)))
		caches = append(caches, ConsistentCache{plural, i.Routes[kind.Kind]})
	}
	return caches
}

// relistAfter is how long a cache may take to reach one list before the list is read
// again: objects that changed after the list are newer in the cache than in the list,
// and only a later list shows them equal.
const relistAfter = time.Second

// WaitCaughtUp returns once each cache has held, since the call began, every object of
// a consistent list of its resource read after the call began, at that list's
// resourceVersion, and holds nothing that list lacks. Lists that fail are retried until
// ctx is done; the error is then ctx's.
func WaitCaughtUp(ctx context.Context, client metadata.Interface, caches []ConsistentCache) error {
	for _, c := range caches {
		if err := waitCaughtUp(ctx, client, c); err != nil {
			return fmt.Errorf("wait for the %s cache to catch up: %w", c.Resource.Resource, err)
		}
	}
	return nil
}

func waitCaughtUp(ctx context.Context, client metadata.Interface, c ConsistentCache) error {
	logger := klog.FromContext(ctx).WithValues("resource", c.Resource.Resource)
	seen := newDeliveredVersions()
	registration, err := c.Informer.AddEventHandler(seen.handler())
	if err != nil {
		return fmt.Errorf("add the catch-up handler: %w", err)
	}
	defer func() { _ = c.Informer.RemoveEventHandler(registration) }()

	backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Cap: 5 * time.Second, Steps: 1 << 30}
	for lists := 1; ; lists++ {
		// ResourceVersion "" is a quorum read: the API server's state now.
		list, err := client.Resource(c.Resource).List(ctx, metav1.ListOptions{})
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			logger.V(2).Info("Listing to check the cache failed; retrying", "err", err)
			sleepCtx(ctx, backoff.Step())
			continue
		}
		want := make(map[string]string, len(list.Items))
		for i := range list.Items {
			key, _ := cache.MetaNamespaceKeyFunc(&list.Items[i])
			want[key] = list.Items[i].ResourceVersion
		}
		err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, relistAfter, true, func(context.Context) (bool, error) {
			return seen.caughtUp(want, c.Informer.GetStore()), nil
		})
		if err == nil {
			logger.V(4).Info("Cache caught up with the API server", "objects", len(want), "lists", lists)
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		logger.V(2).Info("Cache is behind the API server; listing again", "objects", len(want), "lists", lists)
	}
}

// deliveredVersions records the resourceVersions an informer delivered to a handler,
// by key. Events of one key arrive in order, so once the version a list returned was
// delivered, the cache holds that version or a newer one.
type deliveredVersions struct {
	mu       sync.Mutex
	versions map[string]map[string]bool
}

func newDeliveredVersions() *deliveredVersions {
	return &deliveredVersions{versions: map[string]map[string]bool{}}
}

func (d *deliveredVersions) handler() cache.ResourceEventHandler {
	note := func(obj any) {
		m, err := meta.Accessor(obj)
		if err != nil {
			return
		}
		key, err := cache.MetaNamespaceKeyFunc(m)
		if err != nil {
			return
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.versions[key] == nil {
			d.versions[key] = map[string]bool{}
		}
		d.versions[key][m.GetResourceVersion()] = true
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    note,
		UpdateFunc: func(_, obj any) { note(obj) },
	}
}

// caughtUp reports whether store has reached want: each listed object was delivered at
// its listed version (or is cached at it), and no object the list lacks is cached.
// Versions are compared for equality only.
func (d *deliveredVersions) caughtUp(want map[string]string, store cache.Store) bool {
	for _, key := range store.ListKeys() {
		if _, listed := want[key]; !listed {
			return false
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for key, version := range want {
		if d.versions[key][version] {
			continue
		}
		obj, exists, err := store.GetByKey(key)
		if err != nil || !exists {
			return false
		}
		m, err := meta.Accessor(obj)
		if err != nil || m.GetResourceVersion() != version {
			return false
		}
	}
	return true
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
