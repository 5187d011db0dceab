package informers

import (
	"k8s.io/client-go/tools/cache"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// gatewayEventCases are TestEventHandlers' cases of GatewayClass and Gateway events.
func gatewayEventCases() []eventCase {
	return []eventCase{
		// GatewayClass: the class, its gateways, and their routes.
		{
			name:  "GatewayClass add",
			event: func(h eventHandlers) { h.gatewayClasses.OnAdd(testenv.GatewayClass("consul", worldController), false) },
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
				h.gatewayClasses.OnUpdate(testenv.GatewayClass("other", worldController), resynced(testenv.GatewayClass("other", worldController)))
			},
			want: enqueued{
				GatewayClasses: []string{"other"},
				Gateways:       []string{"apps/edge"},
				GRPCRoutes:     []string{"apps/rpc"},
			},
		},
		{
			name: "GatewayClass delete tombstone",
			event: func(h eventHandlers) {
				h.gatewayClasses.OnDelete(tombstone(testenv.GatewayClass("consul", worldController)))
			},
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
			event: func(h eventHandlers) { h.gatewayClasses.OnAdd(testenv.GatewayClass("unused", worldController), false) },
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
	}
}
