package informers

import (
	"testing"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// ListenerSets, on top of the world: apps/extra naming infra/internal with a
// certificate apps/ls-cert, and HTTPRoute apps/on-set attached to it.
func TestListenerSetEventHandlers(t *testing.T) {
	set := testenv.ListenerSet("apps", "extra", gatewayv1.ParentGatewayReference{Namespace: new(gatewayv1.Namespace("infra")), Name: "internal"},
		gatewayv1.ListenerEntry{Name: "extra", Port: 8080, Protocol: gatewayv1.HTTPProtocolType},
		gatewayv1.ListenerEntry{Name: "https-ls-cert", Port: 8443, Protocol: gatewayv1.HTTPSProtocolType,
			TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "ls-cert"}}}})
	onSet := testenv.HTTPRoute("apps", "on-set", []gatewayv1.ParentReference{{
		Group: new(gatewayv1.Group(gatewayv1.GroupName)), Kind: new(gatewayv1.Kind("ListenerSet")), Name: "extra",
	}})
	// What a change to the ListenerSet's Gateway family enqueues: the Gateway, its
	// routes, the ListenerSet and its routes.
	family := enqueued{
		Gateways:     []string{"infra/internal"},
		ListenerSets: []string{"apps/extra"},
		HTTPRoutes:   []string{"apps/on-set", "infra/admin"},
	}
	runEventCases(t, []eventCase{
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
			h.secrets.OnAdd(testenv.TLSSecret("apps", "ls-cert", nil, nil), false)
		}, family},
		{"labels of the ListenerSet's namespace", func(h eventHandlers) {
			h.namespaces.OnUpdate(testenv.Namespace("apps", map[string]string{"env": "prod"}), testenv.Namespace("apps", map[string]string{"env": "dev"}))
		}, enqueued{
			Gateways:     []string{"infra/public"},
			ListenerSets: []string{"apps/extra"},
			HTTPRoutes:   []string{"apps/on-set", "apps/web"},
			TCPRoutes:    []string{"apps/db"},
			GRPCRoutes:   []string{"apps/rpc"},
		}},
	}, set, onSet)
}
