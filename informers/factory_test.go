package informers

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	configfake "github.com/consul-gateway-controller/consul-gateway-controller/api/client/fake"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// fieldSelectors records the field selector of every list and watch, per resource.
type fieldSelectors struct {
	mu       sync.Mutex
	selected map[string][]string // "list secrets" -> selectors
}

func (f *fieldSelectors) record(verb, resource, selector string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := verb + " " + resource
	f.selected[key] = append(f.selected[key], selector)
}

func (f *fieldSelectors) get(verb, resource string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.selected[verb+" "+resource]...)
}

func recordFieldSelectors(fake *k8stesting.Fake) *fieldSelectors {
	f := &fieldSelectors{selected: map[string][]string{}}
	fake.PrependReactor("list", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		list := action.(k8stesting.ListAction)
		f.record("list", list.GetResource().Resource, list.GetListRestrictions().Fields.String())
		return false, nil, nil
	})
	fake.PrependWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		w := action.(k8stesting.WatchAction)
		f.record("watch", w.GetResource().Resource, w.GetWatchRestrictions().Fields.String())
		return false, nil, nil
	})
	return f
}

// Each Secret watch must ask the API server for its one Secret, and only if it is a
// kubernetes.io/tls Secret; the Namespace and Service informers, for everything.
func TestSecretWatchesSelectOneTLSSecret(t *testing.T) {
	kube := kubefake.NewClientset()
	selectors := recordFieldSelectors(&kube.Fake)
	gateway := newGatewayClientset(t, gateway("infra", "public", "consul", "", gatewayv1.SecretObjectReference{Name: "cert"}))
	startInformers(t, New(kube, gateway, configfake.NewClientset(), 0))

	// The watch starts after the list that syncs the cache; wait for it too.
	waitFor(t, "the Secret watch", func() bool { return len(selectors.get("watch", "secrets")) > 0 })

	for _, call := range []struct{ verb, resource, want string }{
		{"list", "secrets", "metadata.name=cert,type=kubernetes.io/tls"},
		{"watch", "secrets", "metadata.name=cert,type=kubernetes.io/tls"},
		{"list", "services", ""},
		{"list", "namespaces", ""},
	} {
		got := selectors.get(call.verb, call.resource)
		if len(got) == 0 {
			t.Errorf("no %s of %s", call.verb, call.resource)
		}
		for _, selector := range got {
			if selector != call.want {
				t.Errorf("%s %s: field selector %q, want %q", call.verb, call.resource, selector, call.want)
			}
		}
	}
}

// Nothing in any cache keeps managedFields.
func TestInformersDropManagedFields(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1"}}
	withManagedFields := func(obj runtime.Object) {
		accessor, err := meta.Accessor(obj)
		if err != nil {
			t.Fatal(err)
		}
		accessor.SetManagedFields(managed)
	}
	var kubeObjects, gatewayObjects []runtime.Object
	objects := append(world(),
		testenv.ReferenceGrant("data", "routes", "Service", testenv.GrantFrom("HTTPRoute", "apps")),
		testenv.Service("apps", "web-svc"),
		testenv.TLSSecret("infra", "cert", nil, nil))
	for _, obj := range objects {
		withManagedFields(obj)
		if isCore(obj) {
			kubeObjects = append(kubeObjects, obj)
			continue
		}
		gatewayObjects = append(gatewayObjects, obj)
	}

	kube := kubefake.NewClientset(kubeObjects...)
	serveFieldSelectors(kube)
	gateway := newGatewayClientset(t, gatewayObjects...)
	// The fakes must serve managedFields, or this test proves nothing.
	served, err := kube.CoreV1().Services("apps").Get(context.Background(), "web-svc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(served.ManagedFields) == 0 {
		t.Fatal("the fake clientset dropped managedFields itself")
	}
	servedGateway, err := gateway.GatewayV1().Gateways("infra").Get(context.Background(), "public", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(servedGateway.ManagedFields) == 0 {
		t.Fatal("the fake Gateway API clientset dropped managedFields itself")
	}

	i := startInformers(t, New(kube, gateway, configfake.NewClientset(), 0))

	secrets, err := i.Secrets.Lister().List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	for kind, objs := range map[string][]any{
		"GatewayClass":   i.GatewayClasses.Informer().GetStore().List(),
		"Gateway":        i.Gateways.Informer().GetStore().List(),
		"HTTPRoute":      i.Routes["HTTPRoute"].GetStore().List(),
		"TCPRoute":       i.Routes["TCPRoute"].GetStore().List(),
		"GRPCRoute":      i.Routes["GRPCRoute"].GetStore().List(),
		"ReferenceGrant": i.ReferenceGrants.Informer().GetStore().List(),
		"Namespace":      i.Namespaces.Informer().GetStore().List(),
		"Service":        i.Services.Informer().GetStore().List(),
		"Secret":         anys(secrets),
	} {
		if len(objs) == 0 {
			t.Errorf("%s: cache is empty", kind)
		}
		for _, obj := range objs {
			accessor, err := meta.Accessor(obj)
			if err != nil {
				t.Fatal(err)
			}
			if accessor.GetManagedFields() != nil {
				t.Errorf("%s %s/%s kept managedFields", kind, accessor.GetNamespace(), accessor.GetName())
			}
		}
	}
}

func anys[T any](list []T) []any {
	out := make([]any, len(list))
	for i, v := range list {
		out[i] = v
	}
	return out
}

// isCore reports whether obj is served by the core clientset.
func isCore(obj runtime.Object) bool {
	switch obj.(type) {
	case *corev1.Namespace, *corev1.Service, *corev1.Secret:
		return true
	}
	return false
}

func TestTrimMetadata(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}

	t.Run("object", func(t *testing.T) {
		svc := testenv.Service("apps", "web")
		svc.ManagedFields = managed
		svc.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: `{"spec":{}}`, "keep": "me"}
		got, err := trimMetadata(svc)
		if err != nil {
			t.Fatal(err)
		}
		trimmed := got.(*corev1.Service)
		if trimmed.ManagedFields != nil {
			t.Error("managedFields kept")
		}
		if diff := cmp.Diff(map[string]string{"keep": "me"}, trimmed.Annotations); diff != "" {
			t.Errorf("annotations (-want +got):\n%s", diff)
		}
	})

	t.Run("tombstone passes through untouched", func(t *testing.T) {
		svc := testenv.Service("apps", "web")
		svc.ManagedFields = managed
		in := cache.DeletedFinalStateUnknown{Key: "apps/web", Obj: svc}
		got, err := trimMetadata(in)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(in, got); diff != "" {
			t.Errorf("tombstone changed (-want +got):\n%s", diff)
		}
		if svc.ManagedFields == nil {
			t.Error("the tombstone's object was transformed")
		}
	})

	t.Run("no object metadata", func(t *testing.T) {
		got, err := trimMetadata("not an object")
		if err != nil {
			t.Fatal(err)
		}
		if got != "not an object" {
			t.Errorf("got %v", got)
		}
	})
}

func TestNewInstallsIndexers(t *testing.T) {
	i := New(kubefake.NewClientset(), gatewayfake.NewClientset(), configfake.NewClientset(), 0)
	routes := []string{cache.NamespaceIndex, RouteParentGatewayIndex, routeBackendServiceNameIndex, RouteParentListenerSetIndex, routeBackendMeshServiceIndex}
	type indexes struct {
		informer cache.SharedIndexInformer
		want     []string
	}
	all := map[string]indexes{
		"GatewayClass": {i.GatewayClasses.Informer(), []string{cache.NamespaceIndex, gatewayClassParametersIndex}},
		"Gateway": {i.Gateways.Informer(), []string{
			cache.NamespaceIndex, gatewayClassNameIndex, gatewayCertificateSecretIndex, gatewaySelectsNamespacesIndex, gatewayParametersIndex,
		}},
		"ListenerSet": {i.ListenerSets.Informer(), []string{
			cache.NamespaceIndex, ListenerSetParentGatewayIndex, listenerSetCertificateSecretIndex,
		}},
		"GatewayConfig":  {i.GatewayConfigs, []string{cache.NamespaceIndex}},
		"ReferenceGrant": {i.ReferenceGrants.Informer(), []string{cache.NamespaceIndex}},
		"Namespace":      {i.Namespaces.Informer(), []string{cache.NamespaceIndex}},
		"Service":        {i.Services.Informer(), []string{cache.NamespaceIndex, ServiceNameIndex}},
		"Pod":            {i.InjectedPods, []string{cache.NamespaceIndex, PodConsulServiceIndex}},
		"EndpointSlice":  {i.EndpointSlices, []string{cache.NamespaceIndex, EndpointSliceServiceIndex, EndpointSlicePodIndex}},
	}
	if len(i.Routes) != len(gatewayapi.Routes) {
		t.Errorf("%d route informers for %d route kinds", len(i.Routes), len(gatewayapi.Routes))
	}
	for kind, informer := range i.Routes {
		all[string(kind)] = indexes{informer, routes}
	}
	for kind, tt := range all {
		got := sets.List(sets.KeySet(tt.informer.GetIndexer().GetIndexers()))
		if diff := cmp.Diff(sets.List(sets.New(tt.want...)), got); diff != "" {
			t.Errorf("%s indexes (-want +got):\n%s", kind, diff)
		}
	}
}

func TestHasSyncedCoversHandlers(t *testing.T) {
	i := New(kubefake.NewClientset(), gatewayfake.NewClientset(), configfake.NewClientset(), 0)
	// GatewayClasses, Gateways, ListenerSets, ReferenceGrants, Namespaces, Services,
	// Secrets, GatewayConfigs, InjectedPods, EndpointSlices and every route kind.
	informers := 10 + len(gatewayapi.Routes)
	if got := len(i.HasSynced()); got != informers {
		t.Errorf("before AddEventHandlers: %d HasSynced, want one per informer (%d)", got, informers)
	}
	if err := i.AddEventHandlers(t.Context(), newQueues(t)); err != nil {
		t.Fatal(err)
	}
	if got := len(i.HasSynced()); got != 2*informers {
		t.Errorf("after AddEventHandlers: %d HasSynced, want one per informer and handler (%d)", got, 2*informers)
	}
}

// The handlers AddEventHandlers registers see the running informers' events: the
// initial list, and a Secret created and deleted afterwards.
func TestAddEventHandlersOnRunningInformers(t *testing.T) {
	kube := kubefake.NewClientset()
	secretWatch := make(chan struct{})
	var once sync.Once
	// Serve the Secret watch here to know when it is open: the fake clientset drops an
	// event that comes before its watch.
	kube.PrependWatchReactor("secrets", func(action k8stesting.Action) (bool, watch.Interface, error) {
		w, err := kube.Tracker().Watch(action.GetResource(), action.GetNamespace())
		once.Do(func() { close(secretWatch) })
		return true, w, err
	})
	gateway := newGatewayClientset(t,
		testenv.GatewayClass("consul", worldController),
		gateway("infra", "public", "consul", "", gatewayv1.SecretObjectReference{Name: "cert"}),
		testenv.HTTPRoute("apps", "web", []gatewayv1.ParentReference{{Namespace: new(gatewayv1.Namespace("infra")), Name: "public"}}),
	)
	i := New(kube, gateway, configfake.NewClientset(), 0)
	queues := newQueues(t)
	if err := i.AddEventHandlers(t.Context(), queues); err != nil {
		t.Fatal(err)
	}
	startInformers(t, i)

	// HasSynced covers the handlers, so the initial list is in the queues now.
	if diff := cmp.Diff(enqueued{
		GatewayClasses: []string{"consul"},
		Gateways:       []string{"infra/public"},
		HTTPRoutes:     []string{"apps/web"},
	}, drain(queues), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("initial list (-want +got):\n%s", diff)
	}

	select {
	case <-secretWatch:
	case <-time.After(10 * time.Second):
		t.Fatal("the Secret cache never watched")
	}
	want := enqueued{Gateways: []string{"infra/public"}, HTTPRoutes: []string{"apps/web"}}
	ctx := context.Background()

	if _, err := kube.CoreV1().Secrets("infra").Create(ctx, testenv.TLSSecret("infra", "cert", nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForKeys(t, queues, want)

	if err := kube.CoreV1().Secrets("infra").Delete(ctx, "cert", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForKeys(t, queues, want)
}

// newGatewayClientset returns a fake clientset serving objs. It creates them under
// explicit resources because the fake's own guess from the kind turns Gateway into
// "gatewaies", where no list ever looks.
func newGatewayClientset(t *testing.T, objs ...runtime.Object) *gatewayfake.Clientset {
	t.Helper()
	client := gatewayfake.NewSimpleClientset()
	for _, obj := range objs {
		var resource string
		switch obj.(type) {
		case *gatewayv1.GatewayClass:
			resource = "gatewayclasses"
		case *gatewayv1.Gateway:
			resource = "gateways"
		case *gatewayv1.HTTPRoute:
			resource = "httproutes"
		case *gatewayv1.TCPRoute:
			resource = "tcproutes"
		case *gatewayv1.GRPCRoute:
			resource = "grpcroutes"
		case *gatewayv1.ReferenceGrant:
			resource = "referencegrants"
		default:
			t.Fatalf("no Gateway API resource for %T", obj)
		}
		accessor, err := meta.Accessor(obj)
		if err != nil {
			t.Fatal(err)
		}
		gvr := schema.GroupVersionResource{Group: gatewayv1.GroupName, Version: "v1", Resource: resource}
		if err := client.Tracker().Create(gvr, obj, accessor.GetNamespace()); err != nil {
			t.Fatal(err)
		}
	}
	return client
}

// startInformers starts i, waits for its caches, and stops it when the test ends.
func startInformers(t *testing.T, i *Informers) *Informers {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(func() {
		stop()
		i.Shutdown()
	})
	i.StartWithContext(ctx)
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if !cache.WaitForCacheSync(waitCtx.Done(), i.HasSynced()...) {
		t.Fatal("caches did not sync")
	}
	return i
}

// waitForKeys drains the queues until they have held exactly want.
func waitForKeys(t *testing.T, q Queues, want enqueued) {
	t.Helper()
	var got enqueued
	ok := func() bool {
		more := drain(q)
		got = enqueued{
			GatewayClasses: union(got.GatewayClasses, more.GatewayClasses),
			Gateways:       union(got.Gateways, more.Gateways),
			HTTPRoutes:     union(got.HTTPRoutes, more.HTTPRoutes),
			TCPRoutes:      union(got.TCPRoutes, more.TCPRoutes),
			GRPCRoutes:     union(got.GRPCRoutes, more.GRPCRoutes),
		}
		return cmp.Equal(want, got, cmpopts.EquateEmpty())
	}
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return ok(), nil })
	if err != nil {
		t.Fatalf("enqueued keys (-want +got):\n%s", cmp.Diff(want, got, cmpopts.EquateEmpty()))
	}
}

func union(a, b []string) []string {
	return sets.List(sets.New(a...).Insert(b...))
}

func waitFor(t *testing.T, what string, done func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return done(), nil })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func TestExists(t *testing.T) {
	inf := New(kubefake.NewClientset(), gatewayfake.NewSimpleClientset(), configfake.NewClientset(), 0)
	route := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"}}
	if err := inf.Routes["HTTPRoute"].GetStore().Add(route); err != nil {
		t.Fatal(err)
	}
	if !inf.Exists("HTTPRoute", cache.ObjectName{Namespace: "ns", Name: "r"}) {
		t.Error("a cached HTTPRoute does not exist")
	}
	for _, kind := range []gatewayv1.Kind{"TCPRoute", "Gateway", "Unknown"} {
		if inf.Exists(kind, cache.ObjectName{Namespace: "ns", Name: "r"}) {
			t.Errorf("a %s ns/r exists though none was cached", kind)
		}
	}
}
