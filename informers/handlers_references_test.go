package informers

import (
	corev1 "k8s.io/api/core/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// referenceEventCases are TestEventHandlers' cases of events of what routes and
// listeners refer to: Namespaces, Services, Secrets and ReferenceGrants.
func referenceEventCases() []eventCase {
	return []eventCase{
		// Namespace: label-selecting gateways with their routes, and the namespace's
		// routes.
		{
			name: "Namespace add",
			event: func(h eventHandlers) {
				h.namespaces.OnAdd(testenv.Namespace("apps", map[string]string{"env": "prod"}), false)
			},
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
				h.namespaces.OnUpdate(testenv.Namespace("apps", map[string]string{"env": "prod"}), testenv.Namespace("apps", map[string]string{"env": "dev"}))
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
				h.namespaces.OnUpdate(testenv.Namespace("team", nil), testenv.Namespace("team", map[string]string{"env": "prod"}))
			},
			want: enqueued{Gateways: []string{"infra/public"}, HTTPRoutes: []string{"apps/web", "team/orphan"}, TCPRoutes: []string{"apps/db"}},
		},
		{
			name: "Namespace update leaving labels alone",
			event: func(h eventHandlers) {
				old := testenv.Namespace("apps", map[string]string{"env": "prod"})
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
				ns := testenv.Namespace("apps", map[string]string{"env": "prod"})
				h.namespaces.OnUpdate(ns, resynced(ns))
			},
			want: enqueued{},
		},
		{
			name:  "Namespace delete tombstone",
			event: func(h eventHandlers) { h.namespaces.OnDelete(tombstone(testenv.Namespace("team", nil))) },
			want:  enqueued{Gateways: []string{"infra/public"}, HTTPRoutes: []string{"apps/web", "team/orphan"}, TCPRoutes: []string{"apps/db"}},
		},
		{
			name:  "Namespace without routes",
			event: func(h eventHandlers) { h.namespaces.OnAdd(testenv.Namespace("empty", nil), false) },
			want:  enqueued{Gateways: []string{"infra/public"}, HTTPRoutes: []string{"apps/web"}, TCPRoutes: []string{"apps/db"}},
		},

		// Service: the routes with it as a backend.
		{
			name:  "Service add",
			event: func(h eventHandlers) { h.services.OnAdd(testenv.Service("apps", "web-svc"), false) },
			want:  enqueued{HTTPRoutes: []string{"apps/web"}, GRPCRoutes: []string{"apps/rpc"}},
		},
		{
			name: "Service resync, named across namespaces",
			event: func(h eventHandlers) {
				svc := testenv.Service("data", "db")
				h.services.OnUpdate(svc, resynced(svc))
			},
			want: enqueued{HTTPRoutes: []string{"apps/web"}, TCPRoutes: []string{"apps/db"}},
		},
		{
			name:  "Service delete tombstone",
			event: func(h eventHandlers) { h.services.OnDelete(tombstone(testenv.Service("infra", "admin-svc"))) },
			want:  enqueued{HTTPRoutes: []string{"infra/admin"}},
		},
		{
			// Without namespace mirroring Consul knows it as the same service as apps/web-svc.
			name:  "Service of a routed name in another namespace",
			event: func(h eventHandlers) { h.services.OnAdd(testenv.Service("other", "web-svc"), false) },
			want:  enqueued{HTTPRoutes: []string{"apps/web"}, GRPCRoutes: []string{"apps/rpc"}},
		},
		{
			name:  "Service no route names",
			event: func(h eventHandlers) { h.services.OnAdd(testenv.Service("apps", "unnamed"), false) },
			want:  enqueued{},
		},

		// Secret: the gateways with it as a certificate, and their routes.
		{
			name:  "Secret add",
			event: func(h eventHandlers) { h.secrets.OnAdd(testenv.TLSSecret("infra", "cert", nil, nil), false) },
			want:  enqueued{Gateways: []string{"infra/public"}, HTTPRoutes: []string{"apps/web"}, TCPRoutes: []string{"apps/db"}},
		},
		{
			name: "Secret update",
			event: func(h eventHandlers) {
				old := testenv.TLSSecret("apps", "edge-cert", nil, nil)
				updated := resynced(old)
				updated.Data = map[string][]byte{corev1.TLSCertKey: []byte("rotated")}
				h.secrets.OnUpdate(old, updated)
			},
			want: enqueued{Gateways: []string{"apps/edge"}, GRPCRoutes: []string{"apps/rpc"}},
		},
		{
			name:  "Secret delete tombstone, named across namespaces",
			event: func(h eventHandlers) { h.secrets.OnDelete(tombstone(testenv.TLSSecret("certs", "shared", nil, nil))) },
			want:  enqueued{Gateways: []string{"infra/public"}, HTTPRoutes: []string{"apps/web"}, TCPRoutes: []string{"apps/db"}},
		},
		{
			name:  "Secret no gateway names",
			event: func(h eventHandlers) { h.secrets.OnAdd(testenv.TLSSecret("infra", "unused", nil, nil), false) },
			want:  enqueued{},
		},

		// ReferenceGrant: the objects of each kind it trusts, in the namespace it trusts.
		{
			name: "ReferenceGrant add from routes",
			event: func(h eventHandlers) {
				h.referenceGrants.OnAdd(testenv.ReferenceGrant("data", "routes", "Service", testenv.GrantFrom("HTTPRoute", "apps"), testenv.GrantFrom("TCPRoute", "apps")), false)
			},
			want: enqueued{HTTPRoutes: []string{"apps/web"}, TCPRoutes: []string{"apps/db"}},
		},
		{
			name: "ReferenceGrant update moving between namespaces",
			event: func(h eventHandlers) {
				old := testenv.ReferenceGrant("certs", "gateways", "Service", testenv.GrantFrom("Gateway", "infra"))
				updated := testenv.ReferenceGrant("certs", "gateways", "Service", testenv.GrantFrom("Gateway", "apps"))
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
				grant := testenv.ReferenceGrant("data", "routes", "Service", testenv.GrantFrom("TCPRoute", "apps"))
				h.referenceGrants.OnUpdate(grant, resynced(grant))
			},
			want: enqueued{TCPRoutes: []string{"apps/db"}},
		},
		{
			name: "ReferenceGrant delete tombstone",
			event: func(h eventHandlers) {
				h.referenceGrants.OnDelete(tombstone(testenv.ReferenceGrant("apps", "grpc", "Service", testenv.GrantFrom("GRPCRoute", "apps"), testenv.GrantFrom("HTTPRoute", "team"))))
			},
			want: enqueued{HTTPRoutes: []string{"team/orphan"}, GRPCRoutes: []string{"apps/rpc"}},
		},
		{
			name: "ReferenceGrant from kinds of other groups or no routes",
			event: func(h eventHandlers) {
				coreGateway := gatewayv1.ReferenceGrantFrom{Group: "", Kind: "Gateway", Namespace: "infra"}
				h.referenceGrants.OnAdd(testenv.ReferenceGrant("data", "other", "Service", coreGateway, testenv.GrantFrom("UDPRoute", "apps"), testenv.GrantFrom("HTTPRoute", "data")), false)
			},
			want: enqueued{},
		},
	}
}
