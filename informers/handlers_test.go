package informers

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	configfake "github.com/consul-gateway-controller/consul-gateway-controller/api/client/fake"
	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
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
		gatewayClass("consul"),
		gatewayClass("other"),
		gateway("infra", "public", "consul", gatewayv1.NamespacesFromSelector,
			gatewayv1.SecretObjectReference{Name: "cert"},
			gatewayv1.SecretObjectReference{Namespace: new(gatewayv1.Namespace("certs")), Name: "shared"}),
		gateway("infra", "internal", "consul", gatewayv1.NamespacesFromSame),
		gateway("apps", "edge", "other", gatewayv1.NamespacesFromAll, gatewayv1.SecretObjectReference{Name: "edge-cert"}),
		httpRoute("apps", "web",
			[]gatewayv1.ParentReference{{Namespace: new(gatewayv1.Namespace("infra")), Name: "public"}},
			gatewayv1.BackendObjectReference{Name: "web-svc"},
			gatewayv1.BackendObjectReference{Namespace: new(gatewayv1.Namespace("data")), Name: "db"}),
		httpRoute("infra", "admin", []gatewayv1.ParentReference{{Name: "internal"}}, gatewayv1.BackendObjectReference{Name: "admin-svc"}),
		httpRoute("team", "orphan", []gatewayv1.ParentReference{{Name: "missing"}}),
		tcpRoute("apps", "db",
			[]gatewayv1.ParentReference{{Namespace: new(gatewayv1.Namespace("infra")), Name: "public", SectionName: new(gatewayv1.SectionName("tcp"))}},
			gatewayv1.BackendObjectReference{Namespace: new(gatewayv1.Namespace("data")), Name: "db"}),
		grpcRoute("apps", "rpc", []gatewayv1.ParentReference{{Name: "edge"}}, gatewayv1.BackendObjectReference{Name: "web-svc"}),
		namespace("infra", nil),
		namespace("apps", map[string]string{"env": "prod"}),
		namespace("team", nil),
		namespace("data", nil),
		namespace("certs", nil),
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

func TestEventHandlers(t *testing.T) {
	tests := []struct {
		name  string
		event func(h eventHandlers)
		want  enqueued
	}{
		// GatewayClass: the class, its gateways, and their routes.
		{
			name:  "GatewayClass add",
			event: func(h eventHandlers) { h.gatewayClasses.OnAdd(gatewayClass("consul"), false) },
			want: enqueued{
				GatewayClasses: []string{"consul"},
				Gateways:       []string{"infra/internal", "infra/public"},
				HTTPRoutes:     []string{"apps/web", "infra/admin"},
				TCPRoutes:      []string{"apps/db"},
			},
		},
		{
			name: "GatewayClass update",
			event: func(h eventHandlers) {
				h.gatewayClasses.OnUpdate(gatewayClass("other"), resynced(gatewayClass("other")))
			},
			want: enqueued{
				GatewayClasses: []string{"other"},
				Gateways:       []string{"apps/edge"},
				GRPCRoutes:     []string{"apps/rpc"},
			},
		},
		{
			name:  "GatewayClass delete tombstone",
			event: func(h eventHandlers) { h.gatewayClasses.OnDelete(tombstone(gatewayClass("consul"))) },
			want: enqueued{
				GatewayClasses: []string{"consul"},
				Gateways:       []string{"infra/internal", "infra/public"},
				HTTPRoutes:     []string{"apps/web", "infra/admin"},
				TCPRoutes:      []string{"apps/db"},
			},
		},
		{
			name: "GatewayClass delete tombstone without the object",
			event: func(h eventHandlers) {
				h.gatewayClasses.OnDelete(cache.DeletedFinalStateUnknown{Key: "other"})
			},
			want: enqueued{
				GatewayClasses: []string{"other"},
				Gateways:       []string{"apps/edge"},
				GRPCRoutes:     []string{"apps/rpc"},
			},
		},
		{
			name:  "GatewayClass without gateways",
			event: func(h eventHandlers) { h.gatewayClasses.OnAdd(gatewayClass("unused"), false) },
			want:  enqueued{GatewayClasses: []string{"unused"}},
		},

		// Gateway: the gateway and its routes; never its class.
		{
			name:  "Gateway add",
			event: func(h eventHandlers) { h.gateways.OnAdd(gateway("infra", "public", "consul", ""), false) },
			want: enqueued{
				Gateways:   []string{"infra/public"},
				HTTPRoutes: []string{"apps/web"},
				TCPRoutes:  []string{"apps/db"},
			},
		},
		{
			name: "Gateway update changing its class",
			event: func(h eventHandlers) {
				h.gateways.OnUpdate(gateway("infra", "internal", "consul", ""), gateway("infra", "internal", "other", ""))
			},
			want: enqueued{
				Gateways:   []string{"infra/internal"},
				HTTPRoutes: []string{"infra/admin"},
			},
		},
		{
			name: "Gateway resync",
			event: func(h eventHandlers) {
				gw := gateway("apps", "edge", "other", "")
				h.gateways.OnUpdate(gw, resynced(gw))
			},
			want: enqueued{Gateways: []string{"apps/edge"}, GRPCRoutes: []string{"apps/rpc"}},
		},
		{
			name:  "Gateway delete tombstone",
			event: func(h eventHandlers) { h.gateways.OnDelete(tombstone(gateway("apps", "edge", "other", ""))) },
			want:  enqueued{Gateways: []string{"apps/edge"}, GRPCRoutes: []string{"apps/rpc"}},
		},
		{
			name:  "Gateway without routes",
			event: func(h eventHandlers) { h.gateways.OnAdd(gateway("team", "lonely", "consul", ""), false) },
			want:  enqueued{Gateways: []string{"team/lonely"}},
		},
		{
			name:  "Gateway named by a route that does not exist yet",
			event: func(h eventHandlers) { h.gateways.OnAdd(gateway("team", "missing", "consul", ""), false) },
			want:  enqueued{Gateways: []string{"team/missing"}, HTTPRoutes: []string{"team/orphan"}},
		},

		// Routes: the route and the gateways its old and new parentRefs name.
		{
			name: "HTTPRoute add with a cross-namespace parent",
			event: func(h eventHandlers) {
				h.routes["HTTPRoute"].OnAdd(httpRoute("apps", "web", []gatewayv1.ParentReference{{Namespace: new(gatewayv1.Namespace("infra")), Name: "public"}}), false)
			},
			want: enqueued{Gateways: []string{"infra/public"}, HTTPRoutes: []string{"apps/web"}},
		},
		{
			name: "HTTPRoute update moving between parents",
			event: func(h eventHandlers) {
				old := httpRoute("apps", "web", []gatewayv1.ParentReference{{Namespace: new(gatewayv1.Namespace("infra")), Name: "public"}})
				updated := httpRoute("apps", "web", []gatewayv1.ParentReference{
					{Name: "edge"},
					{Namespace: new(gatewayv1.Namespace("team")), Name: "missing"},
					{Kind: new(gatewayv1.Kind("Service")), Name: "mesh"},
				})
				h.routes["HTTPRoute"].OnUpdate(old, specChanged(old, updated))
			},
			want: enqueued{Gateways: []string{"apps/edge", "infra/public", "team/missing"}, HTTPRoutes: []string{"apps/web"}},
		},
		{
			name: "HTTPRoute resync",
			event: func(h eventHandlers) {
				route := httpRoute("infra", "admin", []gatewayv1.ParentReference{{Name: "internal"}})
				h.routes["HTTPRoute"].OnUpdate(route, resynced(route))
			},
			// A Gateway counts its routes from their specs: same generation, same count.
			want: enqueued{HTTPRoutes: []string{"infra/admin"}},
		},
		{
			name: "HTTPRoute status write",
			event: func(h eventHandlers) {
				route := httpRoute("infra", "admin", []gatewayv1.ParentReference{{Name: "internal"}})
				written := resynced(route)
				written.Status.Parents = []gatewayv1.RouteParentStatus{{ParentRef: gatewayv1.ParentReference{Name: "internal"}, ControllerName: "example.com/consul"}}
				h.routes["HTTPRoute"].OnUpdate(route, written)
			},
			want: enqueued{HTTPRoutes: []string{"infra/admin"}},
		},
		{
			name: "HTTPRoute with no Gateway parent",
			event: func(h eventHandlers) {
				h.routes["HTTPRoute"].OnAdd(httpRoute("apps", "mesh", []gatewayv1.ParentReference{{Kind: new(gatewayv1.Kind("Service")), Name: "web-svc"}}), false)
			},
			want: enqueued{HTTPRoutes: []string{"apps/mesh"}},
		},
		{
			name: "HTTPRoute delete tombstone",
			event: func(h eventHandlers) {
				h.routes["HTTPRoute"].OnDelete(tombstone(httpRoute("infra", "admin", []gatewayv1.ParentReference{{Name: "internal"}})))
			},
			want: enqueued{Gateways: []string{"infra/internal"}, HTTPRoutes: []string{"infra/admin"}},
		},
		{
			name:  "HTTPRoute delete tombstone without the object",
			event: func(h eventHandlers) { h.routes["HTTPRoute"].OnDelete(cache.DeletedFinalStateUnknown{Key: "apps/web"}) },
			want:  enqueued{HTTPRoutes: []string{"apps/web"}},
		},
		{
			name: "TCPRoute add",
			event: func(h eventHandlers) {
				h.routes["TCPRoute"].OnAdd(tcpRoute("apps", "db", []gatewayv1.ParentReference{{Namespace: new(gatewayv1.Namespace("infra")), Name: "public"}}), false)
			},
			want: enqueued{Gateways: []string{"infra/public"}, TCPRoutes: []string{"apps/db"}},
		},
		{
			name: "TCPRoute update",
			event: func(h eventHandlers) {
				old := tcpRoute("apps", "db", []gatewayv1.ParentReference{{Namespace: new(gatewayv1.Namespace("infra")), Name: "public"}})
				updated := tcpRoute("apps", "db", []gatewayv1.ParentReference{{Namespace: new(gatewayv1.Namespace("infra")), Name: "internal"}})
				h.routes["TCPRoute"].OnUpdate(old, specChanged(old, updated))
			},
			want: enqueued{Gateways: []string{"infra/internal", "infra/public"}, TCPRoutes: []string{"apps/db"}},
		},
		{
			name: "TCPRoute delete tombstone",
			event: func(h eventHandlers) {
				h.routes["TCPRoute"].OnDelete(tombstone(tcpRoute("apps", "db", []gatewayv1.ParentReference{{Namespace: new(gatewayv1.Namespace("infra")), Name: "public"}})))
			},
			want: enqueued{Gateways: []string{"infra/public"}, TCPRoutes: []string{"apps/db"}},
		},
		{
			name: "GRPCRoute add",
			event: func(h eventHandlers) {
				h.routes["GRPCRoute"].OnAdd(grpcRoute("apps", "rpc", []gatewayv1.ParentReference{{Name: "edge"}}), false)
			},
			want: enqueued{Gateways: []string{"apps/edge"}, GRPCRoutes: []string{"apps/rpc"}},
		},
		{
			name: "GRPCRoute update",
			event: func(h eventHandlers) {
				old := grpcRoute("apps", "rpc", []gatewayv1.ParentReference{{Name: "edge"}})
				updated := grpcRoute("apps", "rpc", []gatewayv1.ParentReference{{Name: "edge"}, {Namespace: new(gatewayv1.Namespace("infra")), Name: "public"}})
				h.routes["GRPCRoute"].OnUpdate(old, specChanged(old, updated))
			},
			want: enqueued{Gateways: []string{"apps/edge", "infra/public"}, GRPCRoutes: []string{"apps/rpc"}},
		},
		{
			name: "GRPCRoute delete tombstone",
			event: func(h eventHandlers) {
				h.routes["GRPCRoute"].OnDelete(tombstone(grpcRoute("apps", "rpc", []gatewayv1.ParentReference{{Name: "edge"}})))
			},
			want: enqueued{Gateways: []string{"apps/edge"}, GRPCRoutes: []string{"apps/rpc"}},
		},

		// Namespace: label-selecting gateways and the namespace's routes.
		{
			name:  "Namespace add",
			event: func(h eventHandlers) { h.namespaces.OnAdd(namespace("apps", map[string]string{"env": "prod"}), false) },
			want: enqueued{
				Gateways:   []string{"infra/public"},
				HTTPRoutes: []string{"apps/web"},
				TCPRoutes:  []string{"apps/db"},
				GRPCRoutes: []string{"apps/rpc"},
			},
		},
		{
			name: "Namespace label change",
			event: func(h eventHandlers) {
				h.namespaces.OnUpdate(namespace("apps", map[string]string{"env": "prod"}), namespace("apps", map[string]string{"env": "dev"}))
			},
			want: enqueued{
				Gateways:   []string{"infra/public"},
				HTTPRoutes: []string{"apps/web"},
				TCPRoutes:  []string{"apps/db"},
				GRPCRoutes: []string{"apps/rpc"},
			},
		},
		{
			name: "Namespace labels added",
			event: func(h eventHandlers) {
				h.namespaces.OnUpdate(namespace("team", nil), namespace("team", map[string]string{"env": "prod"}))
			},
			want: enqueued{Gateways: []string{"infra/public"}, HTTPRoutes: []string{"team/orphan"}},
		},
		{
			name: "Namespace update leaving labels alone",
			event: func(h eventHandlers) {
				old := namespace("apps", map[string]string{"env": "prod"})
				updated := resynced(old)
				updated.Annotations = map[string]string{"note": "changed"}
				updated.Status.Phase = corev1.NamespaceTerminating
				h.namespaces.OnUpdate(old, updated)
			},
			want: enqueued{},
		},
		{
			name: "Namespace resync",
			event: func(h eventHandlers) {
				ns := namespace("apps", map[string]string{"env": "prod"})
				h.namespaces.OnUpdate(ns, resynced(ns))
			},
			want: enqueued{},
		},
		{
			name:  "Namespace delete tombstone",
			event: func(h eventHandlers) { h.namespaces.OnDelete(tombstone(namespace("team", nil))) },
			want:  enqueued{Gateways: []string{"infra/public"}, HTTPRoutes: []string{"team/orphan"}},
		},
		{
			name:  "Namespace without routes",
			event: func(h eventHandlers) { h.namespaces.OnAdd(namespace("empty", nil), false) },
			want:  enqueued{Gateways: []string{"infra/public"}},
		},

		// Service: the routes with it as a backend.
		{
			name:  "Service add",
			event: func(h eventHandlers) { h.services.OnAdd(service("apps", "web-svc"), false) },
			want:  enqueued{HTTPRoutes: []string{"apps/web"}, GRPCRoutes: []string{"apps/rpc"}},
		},
		{
			name: "Service resync, named across namespaces",
			event: func(h eventHandlers) {
				svc := service("data", "db")
				h.services.OnUpdate(svc, resynced(svc))
			},
			want: enqueued{HTTPRoutes: []string{"apps/web"}, TCPRoutes: []string{"apps/db"}},
		},
		{
			name:  "Service delete tombstone",
			event: func(h eventHandlers) { h.services.OnDelete(tombstone(service("infra", "admin-svc"))) },
			want:  enqueued{HTTPRoutes: []string{"infra/admin"}},
		},
		{
			name:  "Service no route names",
			event: func(h eventHandlers) { h.services.OnAdd(service("apps", "db"), false) },
			want:  enqueued{},
		},

		// Secret: the gateways with it as a certificate, and their routes.
		{
			name:  "Secret add",
			event: func(h eventHandlers) { h.secrets.OnAdd(secret("infra", "cert"), false) },
			want:  enqueued{Gateways: []string{"infra/public"}, HTTPRoutes: []string{"apps/web"}, TCPRoutes: []string{"apps/db"}},
		},
		{
			name: "Secret update",
			event: func(h eventHandlers) {
				old := secret("apps", "edge-cert")
				updated := resynced(old)
				updated.Data = map[string][]byte{corev1.TLSCertKey: []byte("rotated")}
				h.secrets.OnUpdate(old, updated)
			},
			want: enqueued{Gateways: []string{"apps/edge"}, GRPCRoutes: []string{"apps/rpc"}},
		},
		{
			name:  "Secret delete tombstone, named across namespaces",
			event: func(h eventHandlers) { h.secrets.OnDelete(tombstone(secret("certs", "shared"))) },
			want:  enqueued{Gateways: []string{"infra/public"}, HTTPRoutes: []string{"apps/web"}, TCPRoutes: []string{"apps/db"}},
		},
		{
			name:  "Secret no gateway names",
			event: func(h eventHandlers) { h.secrets.OnAdd(secret("infra", "unused"), false) },
			want:  enqueued{},
		},

		// ReferenceGrant: the objects of each kind it trusts, in the namespace it trusts.
		{
			name: "ReferenceGrant add from routes",
			event: func(h eventHandlers) {
				h.referenceGrants.OnAdd(referenceGrant("data", "routes", grantFrom("HTTPRoute", "apps"), grantFrom("TCPRoute", "apps")), false)
			},
			want: enqueued{HTTPRoutes: []string{"apps/web"}, TCPRoutes: []string{"apps/db"}},
		},
		{
			name: "ReferenceGrant update moving between namespaces",
			event: func(h eventHandlers) {
				old := referenceGrant("certs", "gateways", grantFrom("Gateway", "infra"))
				updated := referenceGrant("certs", "gateways", grantFrom("Gateway", "apps"))
				h.referenceGrants.OnUpdate(old, updated)
			},
			want: enqueued{
				Gateways:   []string{"apps/edge", "infra/internal", "infra/public"},
				HTTPRoutes: []string{"apps/web", "infra/admin"},
				TCPRoutes:  []string{"apps/db"},
				GRPCRoutes: []string{"apps/rpc"},
			},
		},
		{
			name: "ReferenceGrant resync",
			event: func(h eventHandlers) {
				grant := referenceGrant("data", "routes", grantFrom("TCPRoute", "apps"))
				h.referenceGrants.OnUpdate(grant, resynced(grant))
			},
			want: enqueued{TCPRoutes: []string{"apps/db"}},
		},
		{
			name: "ReferenceGrant delete tombstone",
			event: func(h eventHandlers) {
				h.referenceGrants.OnDelete(tombstone(referenceGrant("apps", "grpc", grantFrom("GRPCRoute", "apps"), grantFrom("HTTPRoute", "team"))))
			},
			want: enqueued{HTTPRoutes: []string{"team/orphan"}, GRPCRoutes: []string{"apps/rpc"}},
		},
		{
			name: "ReferenceGrant from kinds of other groups or no routes",
			event: func(h eventHandlers) {
				coreGateway := gatewayv1.ReferenceGrantFrom{Group: "", Kind: "Gateway", Namespace: "infra"}
				h.referenceGrants.OnAdd(referenceGrant("data", "other", coreGateway, grantFrom("UDPRoute", "apps"), grantFrom("HTTPRoute", "data")), false)
			},
			want: enqueued{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i := newWorldInformers(t)
			queues := newQueues(t)

			tt.event(i.eventHandlers(t.Context(), queues))

			if diff := cmp.Diff(tt.want, drain(queues), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("enqueued keys (-want +got):\n%s", diff)
			}
		})
	}
}

// An event that cannot be mapped is reported and enqueues nothing: it must not panic
// the informer's goroutine.
func TestEventHandlersUnexpectedObjects(t *testing.T) {
	i := newWorldInformers(t)
	queues := newQueues(t)
	h := i.eventHandlers(t.Context(), queues)

	h.routes["HTTPRoute"].OnDelete(cache.DeletedFinalStateUnknown{Key: "a/b/c"})
	h.referenceGrants.OnAdd(service("apps", "web-svc"), false)
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
	case *corev1.Secret:
		return i.Secrets.Informer()
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
// The fixtures all have resourceVersion "1".
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

func gatewayClass(name string) *gatewayv1.GatewayClass {
	return &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: "example.com/consul"},
	}
}

// gateway returns a Gateway of class with one listener admitting routes from, and one
// TLS listener per certificate.
func gateway(namespace, name, class string, from gatewayv1.FromNamespaces, certs ...gatewayv1.SecretObjectReference) *gatewayv1.Gateway {
	listeners := []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}}
	if from != "" {
		listeners[0].AllowedRoutes = &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &from}}
	}
	for _, cert := range certs {
		listeners = append(listeners, gatewayv1.Listener{
			Name:     gatewayv1.SectionName("https-" + cert.Name),
			Port:     443,
			Protocol: gatewayv1.HTTPSProtocolType,
			TLS:      &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{cert}},
		})
	}
	return &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, ResourceVersion: "1"},
		Spec:       gatewayv1.GatewaySpec{GatewayClassName: gatewayv1.ObjectName(class), Listeners: listeners},
	}
}

func backendRefs(refs []gatewayv1.BackendObjectReference) []gatewayv1.BackendRef {
	var backends []gatewayv1.BackendRef
	for _, ref := range refs {
		backends = append(backends, gatewayv1.BackendRef{BackendObjectReference: ref})
	}
	return backends
}

func httpRoute(namespace, name string, parents []gatewayv1.ParentReference, backends ...gatewayv1.BackendObjectReference) *gatewayv1.HTTPRoute {
	var rules []gatewayv1.HTTPRouteRule
	for _, ref := range backendRefs(backends) {
		rules = append(rules, gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: ref}}})
	}
	return &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, ResourceVersion: "1"},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: parents},
			Rules:           rules,
		},
	}
}

func tcpRoute(namespace, name string, parents []gatewayv1.ParentReference, backends ...gatewayv1.BackendObjectReference) *gatewayv1.TCPRoute {
	return &gatewayv1.TCPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, ResourceVersion: "1"},
		Spec: gatewayv1.TCPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: parents},
			Rules:           []gatewayv1.TCPRouteRule{{BackendRefs: backendRefs(backends)}},
		},
	}
}

func grpcRoute(namespace, name string, parents []gatewayv1.ParentReference, backends ...gatewayv1.BackendObjectReference) *gatewayv1.GRPCRoute {
	var rules []gatewayv1.GRPCRouteRule
	for _, ref := range backendRefs(backends) {
		rules = append(rules, gatewayv1.GRPCRouteRule{BackendRefs: []gatewayv1.GRPCBackendRef{{BackendRef: ref}}})
	}
	return &gatewayv1.GRPCRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, ResourceVersion: "1"},
		Spec: gatewayv1.GRPCRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: parents},
			Rules:           rules,
		},
	}
}

func grantFrom(kind gatewayv1.Kind, namespace gatewayv1.Namespace) gatewayv1.ReferenceGrantFrom {
	return gatewayv1.ReferenceGrantFrom{Group: gatewayv1.GroupName, Kind: kind, Namespace: namespace}
}

func referenceGrant(namespace, name string, from ...gatewayv1.ReferenceGrantFrom) *gatewayv1.ReferenceGrant {
	return &gatewayv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, ResourceVersion: "1"},
		Spec: gatewayv1.ReferenceGrantSpec{
			From: from,
			To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
		},
	}
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, ResourceVersion: "1"}}
}

func service(namespace, name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, ResourceVersion: "1"}}
}

func secret(namespace, name string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, ResourceVersion: "1"},
		Type:       corev1.SecretTypeTLS,
	}
}

// A GatewayConfig event reaches the classes and Gateways that name it as parameters,
// and nothing else; a reference of another kind names no config.
func TestGatewayConfigEvents(t *testing.T) {
	configRef := func(kind gatewayv1.Kind, namespace, name string) *gatewayv1.ParametersReference {
		return &gatewayv1.ParametersReference{Group: v1alpha1.GroupName, Kind: kind, Name: name, Namespace: new(gatewayv1.Namespace(namespace))}
	}
	withParams := gatewayClass("with-params")
	withParams.Spec.ParametersRef = configRef(v1alpha1.GatewayConfigKind, "configs", "shared")
	wrongKind := gatewayClass("wrong-kind")
	wrongKind.Spec.ParametersRef = configRef("ConfigMap", "configs", "shared")
	paramsGateway := gateway("infra", "own", "consul", "")
	paramsGateway.Spec.Infrastructure = &gatewayv1.GatewayInfrastructure{ParametersRef: &gatewayv1.LocalParametersReference{
		Group: v1alpha1.GroupName, Kind: v1alpha1.GatewayConfigKind, Name: "own",
	}}
	config := func(namespace, name string) *v1alpha1.GatewayConfig {
		return &v1alpha1.GatewayConfig{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, ResourceVersion: "1"}}
	}
	for _, tt := range []struct {
		name  string
		event func(h eventHandlers)
		want  enqueued
	}{
		{"the class's config", func(h eventHandlers) { h.gatewayConfigs.OnAdd(config("configs", "shared"), false) },
			enqueued{GatewayClasses: []string{"with-params"}}},
		{"a Gateway's own config", func(h eventHandlers) {
			c := config("infra", "own")
			h.gatewayConfigs.OnUpdate(c, resynced(c))
		}, enqueued{Gateways: []string{"infra/own"}}},
		{"a config nobody names", func(h eventHandlers) { h.gatewayConfigs.OnDelete(config("apps", "own")) }, enqueued{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			i := newWorldInformers(t)
			for _, obj := range []runtime.Object{withParams, wrongKind, paramsGateway} {
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

// listenerSet returns a ListenerSet in namespace naming the Gateway parent, with one
// HTTPS listener per certificate.
func listenerSet(namespace, name string, parent cache.ObjectName, certs ...gatewayv1.SecretObjectReference) *gatewayv1.ListenerSet {
	set := &gatewayv1.ListenerSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, ResourceVersion: "1"},
		Spec: gatewayv1.ListenerSetSpec{
			ParentRef: gatewayv1.ParentGatewayReference{Namespace: new(gatewayv1.Namespace(parent.Namespace)), Name: gatewayv1.ObjectName(parent.Name)},
			Listeners: []gatewayv1.ListenerEntry{{Name: "extra", Port: 8080, Protocol: gatewayv1.HTTPProtocolType}},
		},
	}
	for _, cert := range certs {
		set.Spec.Listeners = append(set.Spec.Listeners, gatewayv1.ListenerEntry{
			Name: gatewayv1.SectionName("https-" + cert.Name), Port: 8443, Protocol: gatewayv1.HTTPSProtocolType,
			TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{cert}},
		})
	}
	return set
}

// ListenerSets, on top of the world: apps/extra naming infra/internal with a
// certificate apps/ls-cert, and HTTPRoute apps/on-set attached to it.
func TestListenerSetEventHandlers(t *testing.T) {
	internal := cache.ObjectName{Namespace: "infra", Name: "internal"}
	set := listenerSet("apps", "extra", internal, gatewayv1.SecretObjectReference{Name: "ls-cert"})
	onSet := httpRoute("apps", "on-set", []gatewayv1.ParentReference{{
		Group: new(gatewayv1.Group(gatewayv1.GroupName)), Kind: new(gatewayv1.Kind("ListenerSet")), Name: "extra",
	}})
	// What a change to the ListenerSet's Gateway family enqueues: the Gateway, its
	// routes, the ListenerSet and its routes.
	family := enqueued{
		Gateways:     []string{"infra/internal"},
		ListenerSets: []string{"apps/extra"},
		HTTPRoutes:   []string{"apps/on-set", "infra/admin"},
	}
	tests := []struct {
		name  string
		event func(h eventHandlers)
		want  enqueued
	}{
		{"ListenerSet add", func(h eventHandlers) { h.listenerSets.OnAdd(set, false) }, family},
		{
			name: "ListenerSet moves to another Gateway: both families",
			event: func(h eventHandlers) {
				moved := specChanged(set, set.DeepCopy())
				moved.Spec.ParentRef.Name = "public"
				h.listenerSets.OnUpdate(set, moved)
			},
			want: enqueued{
				Gateways:     []string{"infra/internal", "infra/public"},
				ListenerSets: []string{"apps/extra"},
				HTTPRoutes:   []string{"apps/on-set", "apps/web", "infra/admin"},
				TCPRoutes:    []string{"apps/db"},
			},
		},
		{"ListenerSet tombstone", func(h eventHandlers) { h.listenerSets.OnDelete(tombstone(set)) }, family},
		{"parent Gateway update", func(h eventHandlers) {
			gw := gateway("infra", "internal", "consul", gatewayv1.NamespacesFromSame)
			h.gateways.OnUpdate(gw, resynced(gw))
		}, family},
		{"route naming the ListenerSet", func(h eventHandlers) { h.routes["HTTPRoute"].OnAdd(onSet, false) }, enqueued{
			ListenerSets: []string{"apps/extra"},
			HTTPRoutes:   []string{"apps/on-set"},
		}},
		{"ListenerSet's certificate Secret", func(h eventHandlers) {
			h.secrets.OnAdd(secret("apps", "ls-cert"), false)
		}, family},
		{"labels of the ListenerSet's namespace", func(h eventHandlers) {
			h.namespaces.OnUpdate(namespace("apps", map[string]string{"env": "prod"}), namespace("apps", map[string]string{"env": "dev"}))
		}, enqueued{
			Gateways:     []string{"infra/public"},
			ListenerSets: []string{"apps/extra"},
			HTTPRoutes:   []string{"apps/on-set", "apps/web"},
			TCPRoutes:    []string{"apps/db"},
			GRPCRoutes:   []string{"apps/rpc"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i := newWorldInformers(t)
			for _, obj := range []runtime.Object{set, onSet} {
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
