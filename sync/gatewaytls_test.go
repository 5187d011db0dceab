package sync

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func frontendValidation() *gatewayv1.GatewayTLSConfig {
	return &gatewayv1.GatewayTLSConfig{Frontend: &gatewayv1.FrontendTLSConfig{Default: gatewayv1.TLSConfig{
		Validation: &gatewayv1.FrontendTLSValidation{CACertificateRefs: []gatewayv1.ObjectReference{{Kind: "ConfigMap", Name: "ca"}}},
	}}}
}

func backendClientCertificate() *gatewayv1.GatewayTLSConfig {
	return &gatewayv1.GatewayTLSConfig{Backend: &gatewayv1.GatewayBackendTLS{ClientCertificateRef: &gatewayv1.SecretObjectReference{Name: "client"}}}
}

// A Gateway that asks for client certificate validation (frontend mTLS) or for a
// client certificate towards its backends asks for what Consul 1.15's API gateway
// cannot do. It stays accepted, says it is not programmed and why, its routes are
// served nowhere on it, and it is not handed to Consul, so it is never served without
// the mTLS it asks for.
func TestGatewayTLSThatConsulCannotHonour(t *testing.T) {
	t.Parallel()
	perPort := &gatewayv1.GatewayTLSConfig{Frontend: &gatewayv1.FrontendTLSConfig{PerPort: []gatewayv1.TLSPortConfig{{
		Port: 443, TLS: gatewayv1.TLSConfig{Validation: frontendValidation().Frontend.Default.Validation},
	}}}}
	notExpressible := summary{"Programmed", "False", "NotExpressible"}
	tests := []struct {
		name    string
		tls     *gatewayv1.GatewayTLSConfig
		message string
	}{
		{"frontend validation by default", frontendValidation(), "spec.tls.frontend: client certificate validation"},
		{"frontend validation on a port", perPort, "spec.tls.frontend: client certificate validation"},
		{"backend client certificate", backendClientCertificate(), "spec.tls.backend.clientCertificateRef"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := gateway("infra", "gw", httpsListener("https", 443, "", "cert"))
			gw.Spec.TLS = tt.tls
			route := httpRoute("infra", "r", nil, parentRef("", "gw", ""))
			d := newTestDecider(t, ourClass(), gw, tlsSecret(t, "infra", "cert"), service("infra", "echo", 8080), route)

			status, err := d.gatewayStatus(gw, ourClass(), metav1.Now())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]summary{{"Accepted", "True", "Accepted"}, notExpressible}, summarize(status.Conditions)); diff != "" {
				t.Errorf("gateway conditions (-want +got):\n%s", diff)
			}
			if msg := status.Conditions[1].Message; !strings.Contains(msg, tt.message) || !strings.Contains(msg, "Consul") {
				t.Errorf("Programmed message %q, want it to name %q and Consul", msg, tt.message)
			}
			if got := summarize(status.Listeners[0].Conditions)[1]; got != notExpressible {
				t.Errorf("listener Programmed %v, want %v", got, notExpressible)
			}

			view, rules, err := d.viewRoute(route)
			if err != nil {
				t.Fatal(err)
			}
			parents, decision, err := d.routeParentStatuses(view, rules, nil, route.Generation, metav1.Now())
			if err != nil {
				t.Fatal(err)
			}
			want := []summary{{"Accepted", "True", "Accepted"}, {"ResolvedRefs", "True", "ResolvedRefs"}, {ConsulAcceptedCondition, "False", "NotExpressible"}}
			if diff := cmp.Diff(want, summarize(parents[0].Conditions)); diff != "" {
				t.Errorf("route parent conditions (-want +got):\n%s", diff)
			}
			if len(decision.Attachments) != 0 {
				t.Errorf("route attachments %v, want none: the Gateway is not programmed", decision.Attachments)
			}
		})
	}
}

// The syncers get such a Gateway as a removal: nothing may be derived from it.
func TestSyncGatewayWithholdsAGatewayConsulCannotHonour(t *testing.T) {
	gw := gateway("infra", "gw", httpListener("http", 80, ""))
	gw.Spec.TLS = frontendValidation()
	c, _, pub := newTestController(t, ourClass(), gw)
	key := cache.MetaObjectToName(gw)
	if err := c.syncGateway(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if len(pub.seen) != 1 || pub.seen[0].Key != key || pub.seen[0].Object != nil {
		t.Fatalf("published %+v, want one removal of %s", pub.seen, key)
	}
}
