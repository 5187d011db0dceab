package informers

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	configfake "github.com/consul-gateway-controller/consul-gateway-controller/api/client/fake"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// The world every handler test starts from:
//
//	GatewayClasses: consul, other
//	Gateways:
//	  infra/public    class consul, certs infra/cert and certs/shared, routes From Selector
//	  infra/internal  class consul, routes From Same
//	  apps/edge       class other, cert apps/edge-cert, routes From All
//	Routes:
//	  HTTPRoute apps/web     parent infra/public; backends apps/web-svc, data/db
//	  HTTPRoute infra/admin  parent internal (infra/internal); backend admin-svc
//	  HTTPRoute team/orphan  parent missing (team/missing)
//	  TCPRoute  apps/db      parent infra/public, section tcp; backend data/db
//	  GRPCRoute apps/rpc     parent edge (apps/edge); backend web-svc
//	Namespaces: infra, apps (env=prod), team, data, certs
//	ReferenceGrants: none (each test brings its own)
func world() []runtime.Object {
	return []runtime.Object{
		testenv.GatewayClass("consul", worldController),
		testenv.GatewayClass("other", worldController),
		gateway("infra", "public", "consul", gatewayv1.NamespacesFromSelector,
			gatewayv1.SecretObjectReference{Name: "cert"},
			gatewayv1.SecretObjectReference{Namespace: new(gatewayv1.Namespace("certs")), Name: "shared"}),
		gateway("infra", "internal", "consul", gatewayv1.NamespacesFromSame),
		gateway("apps", "edge", "other", gatewayv1.NamespacesFromAll, gatewayv1.SecretObjectReference{Name: "edge-cert"}),
		testenv.HTTPRoute("apps", "web",
			[]gatewayv1.ParentReference{{Namespace: new(gatewayv1.Namespace("infra")), Name: "public"}},
			gatewayv1.BackendObjectReference{Name: "web-svc"},
			gatewayv1.BackendObjectReference{Namespace: new(gatewayv1.Namespace("data")), Name: "db"}),
		testenv.HTTPRoute("infra", "admin", []gatewayv1.ParentReference{{Name: "internal"}}, gatewayv1.BackendObjectReference{Name: "admin-svc"}),
		testenv.HTTPRoute("team", "orphan", []gatewayv1.ParentReference{{Name: "missing"}}),
		testenv.TCPRoute("apps", "db",
			[]gatewayv1.ParentReference{{Namespace: new(gatewayv1.Namespace("infra")), Name: "public", SectionName: new(gatewayv1.SectionName("tcp"))}},
			gatewayv1.BackendObjectReference{Namespace: new(gatewayv1.Namespace("data")), Name: "db"}),
		testenv.GRPCRoute("apps", "rpc", []gatewayv1.ParentReference{{Name: "edge"}}, gatewayv1.BackendObjectReference{Name: "web-svc"}),
		testenv.Namespace("infra", nil),
		testenv.Namespace("apps", map[string]string{"env": "prod"}),
		testenv.Namespace("team", nil),
		testenv.Namespace("data", nil),
		testenv.Namespace("certs", nil),
	}
}

// enqueued is what the queues held after an event, each list sorted.
type enqueued struct {
	GatewayClasses []string
	Gateways       []string
	ListenerSets   []string
	HTTPRoutes     []string
	TCPRoutes      []string
	GRPCRoutes     []string
	TLSRoutes      []string
	UDPRoutes      []string
}

// eventCase is an event on top of the world and the keys it must enqueue.
type eventCase struct {
	name  string
	event func(h eventHandlers)
	want  enqueued
}

// runEventCases runs each case as a subtest against its own informers holding the
// world and objs.
func runEventCases(t *testing.T, cases []eventCase, objs ...runtime.Object) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			i := newWorldInformers(t)
			for _, obj := range objs {
				if err := informerOf(t, i, obj).GetIndexer().Add(obj); err != nil {
					t.Fatal(err)
				}
			}
			queues := newQueues(t)

			tt.event(i.eventHandlers(t.Context(), queues))

			if diff := cmp.Diff(tt.want, drain(queues), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("enqueued keys (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEventHandlers: what each event of the world's kinds enqueues (the cases are in
// handlers_*_test.go, by the kind of the event).
func TestEventHandlers(t *testing.T) {
	runEventCases(t, slices.Concat(gatewayEventCases(), routeEventCases(), referenceEventCases()))
}

// An event that cannot be mapped is reported and enqueues nothing: it must not panic
// the informer's goroutine.
func TestEventHandlersUnexpectedObjects(t *testing.T) {
	i := newWorldInformers(t)
	queues := newQueues(t)
	h := i.eventHandlers(t.Context(), queues)

	h.routes["HTTPRoute"].OnDelete(cache.DeletedFinalStateUnknown{Key: "a/b/c"})
	h.referenceGrants.OnAdd(testenv.Service("apps", "web-svc"), false)
	h.referenceGrants.OnDelete(cache.DeletedFinalStateUnknown{Key: "apps/grant"})
	h.services.OnAdd("not an object", false)

	if diff := cmp.Diff(enqueued{}, drain(queues), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("enqueued keys (-want +got):\n%s", diff)
	}
}

// newWorldInformers returns informers, never started, whose caches hold world().
func newWorldInformers(t *testing.T) *Informers {
	t.Helper()
	i := New(kubefake.NewClientset(), gatewayfake.NewClientset(), configfake.NewClientset(), 0)
	for _, obj := range world() {
		if err := informerOf(t, i, obj).GetIndexer().Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	return i
}

func informerOf(t *testing.T, i *Informers, obj runtime.Object) cache.SharedIndexInformer {
	t.Helper()
	if kind, ok := gatewayapi.RouteOf(obj); ok {
		return i.Routes[kind.Kind]
	}
	switch obj.(type) {
	case *gatewayv1.GatewayClass:
		return i.GatewayClasses.Informer()
	case *gatewayv1.Gateway:
		return i.Gateways.Informer()
	case *gatewayv1.ListenerSet:
		return i.ListenerSets.Informer()
	case *gatewayv1.ReferenceGrant:
		return i.ReferenceGrants.Informer()
	case *corev1.Namespace:
		return i.Namespaces.Informer()
	case *corev1.Service:
		return i.Services.Informer()
	case *corev1.Pod:
		return i.InjectedPods
	case *discoveryv1.EndpointSlice:
		return i.EndpointSlices
	}
	t.Fatalf("no informer for %T", obj)
	return nil
}

func newQueues(t *testing.T) Queues {
	q := Queues{
		GatewayClasses: workqueue.NewTyped[string](),
		Gateways:       workqueue.NewTyped[cache.ObjectName](),
		ListenerSets:   workqueue.NewTyped[cache.ObjectName](),
		Routes:         map[gatewayv1.Kind]workqueue.TypedInterface[cache.ObjectName]{},
	}
	for _, kind := range gatewayapi.Routes {
		q.Routes[kind.Kind] = workqueue.NewTyped[cache.ObjectName]()
	}
	t.Cleanup(func() {
		q.GatewayClasses.ShutDown()
		q.Gateways.ShutDown()
		q.ListenerSets.ShutDown()
		for _, queue := range q.Routes {
			queue.ShutDown()
		}
	})
	return q
}

// drain empties the queues and returns what they held.
func drain(q Queues) enqueued {
	return enqueued{
		GatewayClasses: drainQueue(q.GatewayClasses, func(name string) string { return name }),
		Gateways:       drainQueue(q.Gateways, cache.ObjectName.String),
		ListenerSets:   drainQueue(q.ListenerSets, cache.ObjectName.String),
		HTTPRoutes:     drainQueue(q.Routes["HTTPRoute"], cache.ObjectName.String),
		TCPRoutes:      drainQueue(q.Routes["TCPRoute"], cache.ObjectName.String),
		GRPCRoutes:     drainQueue(q.Routes["GRPCRoute"], cache.ObjectName.String),
		TLSRoutes:      drainQueue(q.Routes["TLSRoute"], cache.ObjectName.String),
		UDPRoutes:      drainQueue(q.Routes["UDPRoute"], cache.ObjectName.String),
	}
}

func drainQueue[T comparable](q workqueue.TypedInterface[T], key func(T) string) []string {
	var keys []string
	for q.Len() > 0 {
		item, _ := q.Get()
		q.Done(item)
		keys = append(keys, key(item))
	}
	slices.Sort(keys)
	return keys
}

func tombstone(obj runtime.Object) cache.DeletedFinalStateUnknown {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		panic(err)
	}
	return cache.DeletedFinalStateUnknown{Key: key, Obj: obj}
}

// resynced returns a copy of obj with another resourceVersion, as an update carries.
// The fixtures have none.
func resynced[T interface {
	runtime.Object
	metav1.Object
}](obj T) T {
	updated := obj.DeepCopyObject().(T)
	updated.SetResourceVersion("2")
	return updated
}

// specChanged is updated as the API server stores a spec change of old: a new version
// and the next generation.
func specChanged[T interface {
	runtime.Object
	metav1.Object
}](old, updated T) T {
	updated = resynced(updated)
	updated.SetGeneration(old.GetGeneration() + 1)
	return updated
}

// worldController is the controller of the world's GatewayClasses.
const worldController gatewayv1.GatewayController = "example.com/consul"

// gateway returns a Gateway of class with one listener admitting routes from, and one
// TLS listener per certificate.
func gateway(namespace, name, class string, from gatewayv1.FromNamespaces, certs ...gatewayv1.SecretObjectReference) *gatewayv1.Gateway {
	http := testenv.HTTPListener("http", 80)
	if from != "" {
		http.AllowedRoutes = &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &from}}
	}
	listeners := []gatewayv1.Listener{http}
	for _, cert := range certs {
		listeners = append(listeners, testenv.HTTPSListener("https-"+string(cert.Name), 443, cert))
	}
	return testenv.Gateway(namespace, name, class, listeners...)
}
