package integration

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// TestWaitCaughtUpWaitsForALaggingCache plays a standby replica whose watch is behind
// when it takes the lease: its Service cache holds an older version of one Service and
// lacks another. WaitCaughtUp must not return while the watch holds those changes back,
// and once they are let through it returns with the cache holding what the API server
// held when it was called.
func TestWaitCaughtUpWaitsForALaggingCache(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ns := env.NewNamespace(t, "caught-up")
	cfg := env.Kube.Config(testenv.AdminUser)
	kube := kubernetes.NewForConfigOrDie(cfg)
	meta := metadata.NewForConfigOrDie(cfg)
	services := kube.CoreV1().Services(ns)

	older, err := services.Create(ctx, testenv.Service(ns, "older", 80), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	// Every namespace, as the controller's caches are: the list it is compared with is
	// of every namespace.
	listWatch := cache.NewListWatchFromClient(kube.CoreV1().RESTClient(), "services", metav1.NamespaceAll, fields.Everything())
	held := &cache.ListWatch{
		ListWithContextFunc: listWatch.ListWithContextFunc,
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			w, err := listWatch.WatchFuncWithContext(ctx, options)
			if err != nil {
				return nil, err
			}
			return heldUntil(w, gate), nil
		},
	}
	informer := cache.NewSharedIndexInformer(held, &corev1.Service{}, 0, cache.Indexers{})
	go informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("the Service cache did not sync")
	}

	older.Labels = map[string]string{"edited": "yes"}
	newer, err := services.Update(ctx, older, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	added, err := services.Create(ctx, testenv.Service(ns, "added", 80), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	done := make(chan error, 1)
	go func() {
		done <- informers.WaitCaughtUp(ctx, meta, []informers.ConsistentCache{{
			Resource: schema.GroupVersionResource{Version: "v1", Resource: "services"}, Informer: informer,
		}})
	}()
	select {
	case err := <-done:
		t.Fatalf("WaitCaughtUp returned (%v) while the watch held back an update and a create", err)
	case <-time.After(3 * time.Second):
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, want := range []*corev1.Service{newer, added} {
		obj, exists, err := informer.GetStore().GetByKey(ns + "/" + want.Name)
		if err != nil || !exists {
			t.Fatalf("after WaitCaughtUp, Service %s is not cached (%v)", want.Name, err)
		}
		if got := obj.(*corev1.Service).ResourceVersion; got != want.ResourceVersion {
			t.Errorf("after WaitCaughtUp, Service %s is cached at resourceVersion %s, want %s", want.Name, got, want.ResourceVersion)
		}
	}
}

// heldUntil passes w's events on only once gate is closed, as a watch that lags.
func heldUntil(w watch.Interface, gate <-chan struct{}) watch.Interface {
	out := make(chan watch.Event)
	proxy := watch.NewProxyWatcher(out)
	go func() {
		defer close(out)
		defer w.Stop()
		select {
		case <-gate:
		case <-proxy.StopChan():
			return
		}
		for event := range w.ResultChan() {
			select {
			case out <- event:
			case <-proxy.StopChan():
				return
			}
		}
	}()
	return proxy
}
