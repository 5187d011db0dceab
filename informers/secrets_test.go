package informers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	configfake "github.com/consul-gateway-controller/consul-gateway-controller/api/client/fake"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/metrics"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

func secretName(namespace, name string) cache.ObjectName {
	return cache.ObjectName{Namespace: namespace, Name: name}
}

// certRef is a listener certificateRef; namespace "" leaves it unset.
func certRef(namespace, name string) gatewayv1.SecretObjectReference {
	ref := gatewayv1.SecretObjectReference{Name: gatewayv1.ObjectName(name)}
	if namespace != "" {
		ref.Namespace = new(gatewayv1.Namespace(namespace))
	}
	return ref
}

// httpsEntry is a ListenerSet listener terminating TLS with certs.
func httpsEntry(name string, certs ...gatewayv1.SecretObjectReference) gatewayv1.ListenerEntry {
	return gatewayv1.ListenerEntry(testenv.HTTPSListener(name, 443, certs...))
}

// watched is what the cache watches: each Secret with its count of referrers.
func watched(c *SecretCache) map[cache.ObjectName]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[cache.ObjectName]int{}
	for key, w := range c.watches {
		out[key] = w.refs
	}
	return out
}

// TestSecretCacheReferences: which Secrets the Gateway and ListenerSet events have the
// cache watch, and how many namespaces' referrers each counts. The cache is not started, so these
// are the references alone.
func TestSecretCacheReferences(t *testing.T) {
	configMap, otherGroup, coreGroup := gatewayv1.Kind("ConfigMap"), gatewayv1.Group("example.com"), gatewayv1.Group("")
	public := gateway("infra", "public", "consul", "", certRef("", "cert"), certRef("certs", "shared"))
	// Every reference here but the first two names something that is not a core Secret.
	public.Spec.Listeners = append(public.Spec.Listeners,
		testenv.HTTPSListener("again", 8443, certRef("", "cert")),
		testenv.HTTPSListener("not-secrets", 9443,
			gatewayv1.SecretObjectReference{Kind: &configMap, Name: "cm"},
			gatewayv1.SecretObjectReference{Group: &otherGroup, Name: "vault"}),
	)
	explicitCore := gateway("apps", "edge", "consul", "", gatewayv1.SecretObjectReference{Group: &coreGroup, Name: "edge-cert"})
	set := testenv.ListenerSet("apps", "team", gatewayv1.ParentGatewayReference{Name: "public", Namespace: new(gatewayv1.Namespace("infra"))},
		httpsEntry("team", certRef("", "team-cert"), certRef("certs", "shared")))

	tests := []struct {
		name   string
		events func(gateways, sets cache.ResourceEventHandler)
		want   map[cache.ObjectName]int
	}{
		{
			name: "a Gateway's Secrets, each once, in its namespace by default",
			events: func(gateways, _ cache.ResourceEventHandler) {
				gateways.OnAdd(public, false)
			},
			want: map[cache.ObjectName]int{secretName("infra", "cert"): 1, secretName("certs", "shared"): 1},
		},
		{
			name: "the core group named explicitly",
			events: func(gateways, _ cache.ResourceEventHandler) {
				gateways.OnAdd(explicitCore, false)
			},
			want: map[cache.ObjectName]int{secretName("apps", "edge-cert"): 1},
		},
		{
			name: "a Secret named by a Gateway and a ListenerSet counts both",
			events: func(gateways, sets cache.ResourceEventHandler) {
				gateways.OnAdd(public, false)
				sets.OnAdd(set, false)
			},
			want: map[cache.ObjectName]int{secretName("infra", "cert"): 1, secretName("certs", "shared"): 2, secretName("apps", "team-cert"): 1},
		},
		{
			name: "a resync changes nothing",
			events: func(gateways, _ cache.ResourceEventHandler) {
				gateways.OnAdd(public, false)
				gateways.OnUpdate(public, public)
			},
			want: map[cache.ObjectName]int{secretName("infra", "cert"): 1, secretName("certs", "shared"): 1},
		},
		{
			name: "an update that swaps a certificate releases the old Secret",
			events: func(gateways, _ cache.ResourceEventHandler) {
				gateways.OnAdd(public, false)
				rotated := public.DeepCopy()
				rotated.Spec.Listeners[1].TLS.CertificateRefs[0].Name = "cert-2"
				rotated.Spec.Listeners[3].TLS.CertificateRefs[0].Name = "cert-2"
				gateways.OnUpdate(public, rotated)
			},
			want: map[cache.ObjectName]int{secretName("infra", "cert-2"): 1, secretName("certs", "shared"): 1},
		},
		{
			name: "a deleted Gateway releases its Secrets, a ListenerSet keeps its own",
			events: func(gateways, sets cache.ResourceEventHandler) {
				gateways.OnAdd(public, false)
				sets.OnAdd(set, false)
				gateways.OnDelete(public)
			},
			want: map[cache.ObjectName]int{secretName("certs", "shared"): 1, secretName("apps", "team-cert"): 1},
		},
		{
			name: "a deletion tombstone without the object releases what was recorded",
			events: func(gateways, sets cache.ResourceEventHandler) {
				gateways.OnAdd(public, false)
				sets.OnAdd(set, false)
				sets.OnDelete(cache.DeletedFinalStateUnknown{Key: "apps/team"})
			},
			want: map[cache.ObjectName]int{secretName("infra", "cert"): 1, secretName("certs", "shared"): 1},
		},
		{
			name: "HTTP listeners only: nothing",
			events: func(gateways, _ cache.ResourceEventHandler) {
				gateways.OnAdd(gateway("infra", "plain", "consul", ""), false)
			},
			want: map[cache.ObjectName]int{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := unscoped(New(kubefake.NewClientset(), gatewayfake.NewClientset(), configfake.NewClientset(), 0).Secrets)
			c.releaseDelay = 0
			gateways, sets := referrerHandlers(c)
			tt.events(gateways, sets)
			if diff := cmp.Diff(tt.want, watched(c)); diff != "" {
				t.Errorf("watched Secrets and their referrers (-want +got):\n%s", diff)
			}
		})
	}
}

// unscoped has c watch every reference, of any class, permitted or not, without a
// cap: for tests of how references are read and counted, whose Gateways are in no
// lister.
func unscoped(c *SecretCache) *SecretCache {
	c.scope.ours = func(cache.ObjectName) bool { return true }
	c.scope.permitted = func(string, string, cache.ObjectName) bool { return true }
	c.scope.perNamespace = 1 << 30
	c.judging = true
	return c
}

// referrerHandlers are the handlers trackReferrers registers, for tests that call
// them directly.
func referrerHandlers(c *SecretCache) (gateways, sets cache.ResourceEventHandler) {
	return c.referrerHandler("Gateway", gatewaySecrets), c.referrerHandler("ListenerSet", listenerSetSecrets)
}

// The last referrer leaving releases a Secret only after the release delay; a referrer
// coming back within it keeps the same watch.
func TestSecretCacheReleaseDelay(t *testing.T) {
	c := unscoped(New(kubefake.NewClientset(), gatewayfake.NewClientset(), configfake.NewClientset(), 0).Secrets)
	clock := clocktesting.NewFakeClock(time.Now())
	c.clock = clock
	gateways, _ := referrerHandlers(c)
	cert := secretName("infra", "cert")
	first := gateway("infra", "first", "consul", "", certRef("", "cert"))
	second := gateway("infra", "second", "consul", "", certRef("", "cert"))

	gateways.OnAdd(first, false)
	gateways.OnAdd(second, false)
	original := c.watches[cert]
	gateways.OnDelete(first)
	gateways.OnDelete(second)
	clock.Step(c.releaseDelay - time.Second)
	if diff := cmp.Diff(map[cache.ObjectName]int{cert: 0}, watched(c)); diff != "" {
		t.Fatalf("within the release delay (-want +got):\n%s", diff)
	}

	gateways.OnAdd(second, false)
	clock.Step(time.Hour)
	if c.watches[cert] != original || c.watches[cert].refs != 1 {
		t.Fatalf("named again within the delay: watch %p with %d referrers, want the original %p with 1", c.watches[cert], c.watches[cert].refs, original)
	}

	gateways.OnDelete(second)
	clock.Step(c.releaseDelay)
	if !waitForCondition(func() bool { return len(watched(c)) == 0 }) {
		t.Errorf("after the release delay the cache still watches %v", watched(c))
	}
}

// waitForCondition polls done for a few seconds: a fake clock's AfterFunc runs its
// function on a goroutine of its own.
func waitForCondition(done func() bool) bool {
	for range 500 {
		if done() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// Get never calls a Secret missing that a listener names before its watch has listed.
func TestSecretCacheGetBeforeListed(t *testing.T) {
	i := New(kubefake.NewClientset(), gatewayfake.NewClientset(), configfake.NewClientset(), 0)
	public := gateway("infra", "public", "consul", "", certRef("", "cert"))
	// In the lister and its indexes, but not yet handed to the referrer handler.
	if err := i.Gateways.Informer().GetIndexer().Add(public); err != nil {
		t.Fatal(err)
	}
	lister := i.Secrets.Lister()

	if _, err := lister.Secrets("infra").Get("cert"); !errors.Is(err, ErrSecretNotSynced) {
		t.Errorf("named by a cached Gateway, not watched yet: err = %v, want ErrSecretNotSynced", err)
	}
	gateways, _ := referrerHandlers(i.Secrets)
	gateways.OnAdd(public, false)
	if _, err := lister.Secrets("infra").Get("cert"); !errors.Is(err, ErrSecretNotSynced) {
		t.Errorf("watched, not listed: err = %v, want ErrSecretNotSynced", err)
	}
	if _, err := lister.Secrets("infra").Get("other"); !apierrors.IsNotFound(err) {
		t.Errorf("named by no listener: err = %v, want NotFound", err)
	}
	if i.Secrets.HasSynced() {
		t.Error("HasSynced before Start")
	}
}

// secretSelectors makes kube answer Secret lists and watches by their field selector, as
// the API server does and the fake clientset does not. Each watch's field selector is
// sent on the returned channel once the watch is open: the fake drops the events that
// come before.
func secretSelectors(kube *kubefake.Clientset) <-chan string {
	opened := make(chan string, 100)
	matches := func(selector fields.Selector, obj runtime.Object) bool {
		s, ok := obj.(*corev1.Secret)
		return ok && selector.Matches(fields.Set{"metadata.name": s.Name, "metadata.namespace": s.Namespace, "type": string(s.Type)})
	}
	resource := corev1.SchemeGroupVersion.WithResource("secrets")
	kube.PrependReactor("list", "secrets", func(action k8stesting.Action) (bool, runtime.Object, error) {
		list := action.(k8stesting.ListAction)
		obj, err := kube.Tracker().List(resource, corev1.SchemeGroupVersion.WithKind("Secret"), list.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		secrets := obj.(*corev1.SecretList)
		selector := list.GetListRestrictions().Fields
		secrets.Items = slices.DeleteFunc(secrets.Items, func(s corev1.Secret) bool { return !matches(selector, &s) })
		return true, secrets, nil
	})
	kube.PrependWatchReactor("secrets", func(action k8stesting.Action) (bool, watch.Interface, error) {
		w, err := kube.Tracker().Watch(resource, action.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		selector := action.(k8stesting.WatchAction).GetWatchRestrictions().Fields
		opened <- selector.String()
		return true, watch.Filter(w, func(e watch.Event) (watch.Event, bool) { return e, matches(selector, e.Object) }), nil
	})
	return opened
}

// serveFieldSelectors is secretSelectors for tests that do not wait for watches.
func serveFieldSelectors(kube *kubefake.Clientset) {
	opened := secretSelectors(kube)
	go func() {
		for range opened { //nolint:revive // drained so the reactor never blocks
		}
	}()
}

// gatewayWatchOpened serves Gateway watches from the fake's tracker and closes the
// returned channel once one is open.
func gatewayWatchOpened(t *testing.T, client *gatewayfake.Clientset) <-chan struct{} {
	t.Helper()
	opened := make(chan struct{})
	done := false
	client.PrependWatchReactor("gateways", func(action k8stesting.Action) (bool, watch.Interface, error) {
		w, err := client.Tracker().Watch(action.GetResource(), action.GetNamespace())
		if !done {
			done = true
			close(opened)
		}
		return true, w, err
	})
	return opened
}

func gaugeValue(t *testing.T, g interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

func receive(t *testing.T, ch <-chan string, want string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-ch:
			if got == want {
				return
			}
		case <-timeout:
			t.Fatalf("no watch with the field selector %s", want)
		}
	}
}

func sortedNames(names []cache.ObjectName) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, n.String())
	}
	slices.Sort(out)
	return out
}

// The running cache holds exactly the kubernetes.io/tls Secrets listeners name, among
// many it must ignore; follows Gateways as they come and go; and tells the handlers
// about a Secret named before it exists, when its watch lists and when it is created.
func TestSecretCacheFollowsReferences(t *testing.T) {
	cachedBefore, watchesBefore := gaugeValue(t, metrics.CachedSecrets), gaugeValue(t, metrics.SecretWatches)
	var objs []runtime.Object
	for n := range 50 {
		objs = append(objs, testenv.TLSSecret("infra", fmt.Sprintf("unrelated-%d", n), []byte("cert"), []byte("key")))
	}
	opaque := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "opaque"}, Type: corev1.SecretTypeOpaque}
	objs = append(objs, opaque, testenv.TLSSecret("infra", "cert", nil, nil), testenv.TLSSecret("certs", "shared", nil, nil))
	kube := kubefake.NewClientset(objs...)
	opened := secretSelectors(kube)
	gateways := newGatewayClientset(t, gateway("infra", "public", "consul", "", certRef("", "cert"), certRef("", "opaque"), certRef("certs", "missing")))
	gatewayWatch := gatewayWatchOpened(t, gateways)
	i := New(kube, gateways, configfake.NewClientset(), 0)
	i.Secrets.releaseDelay = 0
	queues := newQueues(t)
	if err := i.AddEventHandlers(t.Context(), queues); err != nil {
		t.Fatal(err)
	}
	startInformers(t, i)
	<-gatewayWatch
	lister := i.Secrets.Lister()

	// Synced: the one TLS Secret named, and the others named are known missing.
	if diff := cmp.Diff([]string{"infra/cert"}, sortedNames(i.Secrets.Cached())); diff != "" {
		t.Errorf("cached at start (-want +got):\n%s", diff)
	}
	for _, key := range []cache.ObjectName{secretName("infra", "opaque"), secretName("certs", "missing")} {
		if _, err := lister.Secrets(key.Namespace).Get(key.Name); !apierrors.IsNotFound(err) {
			t.Errorf("Get %s = %v, want NotFound (Opaque, resp. missing)", key, err)
		}
	}
	if got := gaugeValue(t, metrics.CachedSecrets) - cachedBefore; got != 1 {
		t.Errorf("informer_cached_secrets grew by %v, want 1", got)
	}
	// certs/missing is named from another namespace without a grant: no watch.
	if got := gaugeValue(t, metrics.SecretWatches) - watchesBefore; got != 2 {
		t.Errorf("informer_secret_watches grew by %v, want 2", got)
	}
	drain(queues)

	// A Gateway naming a Secret that does not exist yet: enqueued when its watch has
	// listed, and again when the Secret comes.
	ctx := context.Background()
	late := gateway("apps", "late", "consul", "", certRef("", "late-cert"))
	if _, err := gateways.GatewayV1().Gateways("apps").Create(ctx, late, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	receive(t, opened, "metadata.name=late-cert,type=kubernetes.io/tls")
	// The Gateway's own add event enqueues it too, so the key alone does not say the
	// watch has listed: the lister does, once it answers NotFound.
	waitFor(t, "apps/late-cert known missing once its watch listed", func() bool {
		_, err := lister.Secrets("apps").Get("late-cert")
		return apierrors.IsNotFound(err)
	})
	waitForKeys(t, queues, enqueued{Gateways: []string{"apps/late"}})
	if _, err := kube.CoreV1().Secrets("apps").Create(ctx, testenv.TLSSecret("apps", "late-cert", nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForKeys(t, queues, enqueued{Gateways: []string{"apps/late"}})
	waitFor(t, "apps/late-cert cached", func() bool { return slices.Contains(i.Secrets.Cached(), secretName("apps", "late-cert")) })

	// Unrelated TLS Secrets created now are not cached either.
	if _, err := kube.CoreV1().Secrets("apps").Create(ctx, testenv.TLSSecret("apps", "unrelated", nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The first Gateway goes: so do its Secrets.
	if err := gateways.GatewayV1().Gateways("infra").Delete(ctx, "public", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "infra/public's Secrets released", func() bool { return len(watched(i.Secrets)) == 1 })
	if diff := cmp.Diff([]string{"apps/late-cert"}, sortedNames(i.Secrets.Cached())); diff != "" {
		t.Errorf("cached at the end (-want +got):\n%s", diff)
	}
	waitFor(t, "the gauges back to one Secret", func() bool {
		return gaugeValue(t, metrics.CachedSecrets)-cachedBefore == 1 && gaugeValue(t, metrics.SecretWatches)-watchesBefore == 1
	})
}

// HasSynced waits for the watches of the Secrets named at start-up to list: until then
// the status pipeline would find every certificate missing.
func TestSecretCacheHasSyncedWaitsForWatches(t *testing.T) {
	kube := kubefake.NewClientset(testenv.TLSSecret("infra", "cert", nil, nil))
	serveFieldSelectors(kube)
	release := make(chan struct{})
	kube.PrependReactor("list", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		<-release
		return false, nil, nil
	})
	gateways := newGatewayClientset(t, gateway("infra", "public", "consul", "", certRef("", "cert")))
	i := New(kube, gateways, configfake.NewClientset(), 0)
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(func() {
		stop()
		i.Shutdown()
	})
	i.StartWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), i.Gateways.Informer().HasSynced) {
		t.Fatal("Gateways did not sync")
	}

	time.Sleep(300 * time.Millisecond)
	if i.Secrets.HasSynced() {
		t.Error("HasSynced while the named Secret's watch cannot list")
	}
	if _, err := i.Secrets.Lister().Secrets("infra").Get("cert"); !errors.Is(err, ErrSecretNotSynced) {
		t.Errorf("Get before the list = %v, want ErrSecretNotSynced", err)
	}
	close(release)
	waitFor(t, "HasSynced", i.Secrets.HasSynced)
	if _, err := i.Secrets.Lister().Secrets("infra").Get("cert"); err != nil {
		t.Errorf("Get after the list: %v", err)
	}
}
