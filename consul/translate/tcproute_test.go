package translate

import (
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	gwdecision "github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

func TestTCPRuleBackends(t *testing.T) {
	tr := &pass{}
	tests := []struct {
		name        string
		refs        []gatewayv1.BackendRef
		want        consulapi.TCPService
		wantProblem string
		unresolved  []gwdecision.BackendRefIndex
	}{
		{"one", []gatewayv1.BackendRef{backendRef("", "a", 1, nil)}, consulapi.TCPService{Name: "a"}, "", nil},
		{"weight 0 not counted", []gatewayv1.BackendRef{backendRef("", "a", 1, new(int32(0))), backendRef("", "b", 1, new(int32(5)))}, consulapi.TCPService{Name: "b"}, "", nil},
		{"none", []gatewayv1.BackendRef{backendRef("", "a", 1, new(int32(0)))}, consulapi.TCPService{}, "rule 0: no backendRef has a weight above 0; the rule is left out of Consul", nil},
		{"two", []gatewayv1.BackendRef{backendRef("", "a", 1, nil), backendRef("", "b", 1, nil)}, consulapi.TCPService{}, "rule 0: 2 backends would receive connections, but Consul's tcp-route forwards to a single service; the rule is left out of Consul", nil},
		{"renamed", []gatewayv1.BackendRef{backendRef("", "c", 1, nil)}, consulapi.TCPService{Name: "c-v2"}, "", nil},
		{"unresolved", []gatewayv1.BackendRef{backendRef("", "a", 1, new(int32(0))), backendRef("other", "b", 1, nil)}, consulapi.TCPService{},
			"rule 0: backendRef other/b did not resolve (see the route's ResolvedRefs condition); the rule is left out of Consul", []gwdecision.BackendRefIndex{{Rule: 0, Ref: 1}}},
		{"an unresolved backendRef of another rule", []gatewayv1.BackendRef{backendRef("", "a", 1, nil)}, consulapi.TCPService{Name: "a"}, "", []gwdecision.BackendRefIndex{{Rule: 1, Ref: 0}}},
	}
	for _, tt := range tests {
		decision := withBackends(unresolvedAt(gwdecision.Route{}, tt.unresolved...), "apps", [][]gatewayv1.BackendRef{tt.refs})
		for i, b := range decision.Backends {
			if b.Referent.Name == "c" {
				decision.Backends[i].Consul = "c-v2"
			}
		}
		got, _, problem := tr.tcpRule("apps", 0, gatewayv1.TCPRouteRule{BackendRefs: tt.refs}, decision)
		if problem != tt.wantProblem {
			t.Errorf("%s: problem %q, want %q", tt.name, problem, tt.wantProblem)
		}
		if diff := gocmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}
