package sync

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
)

// ReasonNotExpressible is the Programmed reason of a Gateway that asks for what
// Consul's API gateway cannot do; the Consul syncer reports what it cannot translate
// with the same reason.
const ReasonNotExpressible = "NotExpressible"

// gatewayTLSProblem says which parts of a Gateway's spec.tls Consul's API gateway
// cannot honour, "" when none. Consul 1.15's listener TLS holds certificates, versions
// and cipher suites only (APIGatewayTLSConfiguration, Consul 1.15.4 agent/structs/config_entry_gateways.go:898): no
// CA to validate client certificates with. Towards backends the gateway speaks Consul's
// own mesh mTLS, with no client certificate of the user's choosing. Serving such a
// Gateway would serve it without the mTLS it asks for, so it is not served at all.
func gatewayTLSProblem(tls *gatewayv1.GatewayTLSConfig) string {
	if tls == nil {
		return ""
	}
	var problems []string
	if asksFrontendValidation(tls.Frontend) {
		problems = append(problems, "spec.tls.frontend: client certificate validation "+consullimits.NotSupported)
	}
	if tls.Backend != nil && tls.Backend.ClientCertificateRef != nil {
		problems = append(problems, "spec.tls.backend.clientCertificateRef: a client certificate towards backends "+consullimits.NotSupported)
	}
	if len(problems) == 0 {
		return ""
	}
	return strings.Join(problems, "; ") + "; the Gateway is not programmed rather than served without it"
}

// asksFrontendValidation reports whether the frontend TLS config asks for client
// certificate validation on any port.
func asksFrontendValidation(f *gatewayv1.FrontendTLSConfig) bool {
	if f == nil {
		return false
	}
	if f.Default.Validation != nil {
		return true
	}
	for _, p := range f.PerPort {
		if p.TLS.Validation != nil {
			return true
		}
	}
	return false
}

// withheld reports whether a confirmed object must not reach the syncers: a Gateway
// asking for TLS that Consul cannot honour (its status says why). The decision reads
// the confirmed object's own spec, the one its status was computed from.
func withheld(obj runtime.Object) bool {
	gw, ok := obj.(*gatewayv1.Gateway)
	return ok && gatewayTLSProblem(gw.Spec.TLS) != ""
}
