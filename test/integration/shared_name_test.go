package integration

import (
	"slices"
	"testing"

	consulapi "github.com/hashicorp/consul/api"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// Without Consul namespace mirroring the Services of one name in every namespace are
// one Consul service. A route that names its own namespace's Service may not reach
// another namespace's pods through that name unless a ReferenceGrant there allows it:
// the binary (which sets that mode from its flags) refuses the backend, naming the
// other namespace, and writes no traffic to it; the grant resolves it.
func TestSharedConsulNameNeedsAGrant(t *testing.T) {
	s := newConsulStack(t, "shared")
	other := env.NewNamespace(t, "shared-other")
	env.Create(t, testenv.Service(other, s.Backend, testenv.BackendPort))
	env.Create(t, s.Route("web"))
	s.runStatusController(t, "shared")
	routeName := s.naming.EntryName(s.Namespace, "web")

	s.awaitResolvedRefs(t, "web", "False/RefNotPermitted: backendRef "+s.Namespace+"/"+s.Backend+` is the Consul service "`+s.Backend+`", which the Services `+other+"/"+s.Backend+" are too")
	s.waitEntry(t, consulapi.HTTPRoute, routeName, "the route's traffic goes nowhere near the shared name", func(e consulapi.ConfigEntry) bool {
		return e != nil && !slices.Contains(httpRouteServices(e), s.Backend)
	})

	env.Create(t, testenv.ReferenceGrant(other, "routes", "Service",
		gatewayv1.ReferenceGrantFrom{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: gatewayv1.Namespace(s.Namespace)}))
	s.awaitResolvedRefs(t, "web", "True/ResolvedRefs")
	s.waitEntry(t, consulapi.HTTPRoute, routeName, "the route sends to the shared name once granted", func(e consulapi.ConfigEntry) bool {
		return slices.Contains(httpRouteServices(e), s.Backend)
	})
}
