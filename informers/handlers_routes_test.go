package informers

import (
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// routeEventCases are TestEventHandlers' cases of route events.
func routeEventCases() []eventCase {
	return []eventCase{
		// Routes: the route, the gateways its old and new parentRefs name, and the
		// routes of its kind naming them.
		{
			name: "HTTPRoute add with a cross-namespace parent",
			event: func(h eventHandlers) {
				h.routes["HTTPRoute"].OnAdd(testenv.HTTPRoute("apps", "web", []gatewayv1.ParentReference{{Namespace: new(gatewayv1.Namespace("infra")), Name: "public"}}), false)
			},
			want: enqueued{Gateways: []string{"infra/public"}, HTTPRoutes: []string{"apps/web"}},
		},
		{
			name: "HTTPRoute update moving between parents",
			event: func(h eventHandlers) {
				old := testenv.HTTPRoute("apps", "web", []gatewayv1.ParentReference{{Namespace: new(gatewayv1.Namespace("infra")), Name: "public"}})
				updated := testenv.HTTPRoute("apps", "web", []gatewayv1.ParentReference{
					{Name: "edge"},
					{Namespace: new(gatewayv1.Namespace("team")), Name: "missing"},
					{Kind: new(gatewayv1.Kind("Service")), Name: "mesh"},
				})
				h.routes["HTTPRoute"].OnUpdate(old, specChanged(old, updated))
			},
			// team/orphan names team/missing too: it competes with apps/web there.
			want: enqueued{Gateways: []string{"apps/edge", "infra/public", "team/missing"}, HTTPRoutes: []string{"apps/web", "team/orphan"}},
		},
		{
			name: "HTTPRoute add beside another route of the Gateway",
			event: func(h eventHandlers) {
				h.routes["HTTPRoute"].OnAdd(testenv.HTTPRoute("infra", "new", []gatewayv1.ParentReference{{Name: "internal"}}), false)
			},
			// infra/admin is judged again: which of the two gets a request may change.
			want: enqueued{Gateways: []string{"infra/internal"}, HTTPRoutes: []string{"infra/admin", "infra/new"}},
		},
		{
			name: "HTTPRoute delete beside another route of the Gateway",
			event: func(h eventHandlers) {
				h.routes["HTTPRoute"].OnDelete(testenv.HTTPRoute("infra", "gone", []gatewayv1.ParentReference{{Name: "internal"}}))
			},
			// infra/admin must not keep a condition naming infra/gone.
			want: enqueued{Gateways: []string{"infra/internal"}, HTTPRoutes: []string{"infra/admin", "infra/gone"}},
		},
		{
			name: "HTTPRoute resync",
			event: func(h eventHandlers) {
				route := testenv.HTTPRoute("infra", "admin", []gatewayv1.ParentReference{{Name: "internal"}})
				h.routes["HTTPRoute"].OnUpdate(route, resynced(route))
			},
			// A Gateway counts its routes from their specs: same generation, same count.
			want: enqueued{HTTPRoutes: []string{"infra/admin"}},
		},
		{
			name: "HTTPRoute status write",
			event: func(h eventHandlers) {
				route := testenv.HTTPRoute("infra", "admin", []gatewayv1.ParentReference{{Name: "internal"}})
				written := resynced(route)
				written.Status.Parents = []gatewayv1.RouteParentStatus{{ParentRef: gatewayv1.ParentReference{Name: "internal"}, ControllerName: "example.com/consul"}}
				h.routes["HTTPRoute"].OnUpdate(route, written)
			},
			want: enqueued{HTTPRoutes: []string{"infra/admin"}},
		},
		{
			name: "HTTPRoute with no Gateway parent",
			event: func(h eventHandlers) {
				h.routes["HTTPRoute"].OnAdd(testenv.HTTPRoute("apps", "mesh", []gatewayv1.ParentReference{{Kind: new(gatewayv1.Kind("Service")), Name: "web-svc"}}), false)
			},
			want: enqueued{HTTPRoutes: []string{"apps/mesh"}},
		},
		{
			name: "HTTPRoute delete tombstone",
			event: func(h eventHandlers) {
				h.routes["HTTPRoute"].OnDelete(tombstone(testenv.HTTPRoute("infra", "admin", []gatewayv1.ParentReference{{Name: "internal"}})))
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
				h.routes["TCPRoute"].OnAdd(testenv.TCPRoute("apps", "db", []gatewayv1.ParentReference{{Namespace: new(gatewayv1.Namespace("infra")), Name: "public"}}), false)
			},
			want: enqueued{Gateways: []string{"infra/public"}, TCPRoutes: []string{"apps/db"}},
		},
		{
			name: "TCPRoute update",
			event: func(h eventHandlers) {
				old := testenv.TCPRoute("apps", "db", []gatewayv1.ParentReference{{Namespace: new(gatewayv1.Namespace("infra")), Name: "public"}})
				updated := testenv.TCPRoute("apps", "db", []gatewayv1.ParentReference{{Namespace: new(gatewayv1.Namespace("infra")), Name: "internal"}})
				h.routes["TCPRoute"].OnUpdate(old, specChanged(old, updated))
			},
			want: enqueued{Gateways: []string{"infra/internal", "infra/public"}, TCPRoutes: []string{"apps/db"}},
		},
		{
			name: "TCPRoute delete tombstone",
			event: func(h eventHandlers) {
				h.routes["TCPRoute"].OnDelete(tombstone(testenv.TCPRoute("apps", "db", []gatewayv1.ParentReference{{Namespace: new(gatewayv1.Namespace("infra")), Name: "public"}})))
			},
			want: enqueued{Gateways: []string{"infra/public"}, TCPRoutes: []string{"apps/db"}},
		},
		{
			name: "GRPCRoute add",
			event: func(h eventHandlers) {
				h.routes["GRPCRoute"].OnAdd(testenv.GRPCRoute("apps", "rpc", []gatewayv1.ParentReference{{Name: "edge"}}), false)
			},
			want: enqueued{Gateways: []string{"apps/edge"}, GRPCRoutes: []string{"apps/rpc"}},
		},
		{
			name: "GRPCRoute update",
			event: func(h eventHandlers) {
				old := testenv.GRPCRoute("apps", "rpc", []gatewayv1.ParentReference{{Name: "edge"}})
				updated := testenv.GRPCRoute("apps", "rpc", []gatewayv1.ParentReference{{Name: "edge"}, {Namespace: new(gatewayv1.Namespace("infra")), Name: "public"}})
				h.routes["GRPCRoute"].OnUpdate(old, specChanged(old, updated))
			},
			want: enqueued{Gateways: []string{"apps/edge", "infra/public"}, GRPCRoutes: []string{"apps/rpc"}},
		},
		{
			name: "GRPCRoute delete tombstone",
			event: func(h eventHandlers) {
				h.routes["GRPCRoute"].OnDelete(tombstone(testenv.GRPCRoute("apps", "rpc", []gatewayv1.ParentReference{{Name: "edge"}})))
			},
			want: enqueued{Gateways: []string{"apps/edge"}, GRPCRoutes: []string{"apps/rpc"}},
		},
	}
}
