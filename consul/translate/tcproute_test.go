package translate

import (
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	gwdecision "github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

func TestTCPRuleBackends(t *testing.T) {
	tr := &pass{snap: snapshotOf(backendService("apps", "a", 1), backendService("apps", "b", 1))}
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
		{"missing", []gatewayv1.BackendRef{backendRef("", "c", 1, nil)}, consulapi.TCPService{}, "rule 0: backendRef apps/c names a Service that does not exist; the rule is left out of Consul", nil},
		{"unresolved", []gatewayv1.BackendRef{backendRef("", "a", 1, new(int32(0))), backendRef("other", "b", 1, nil)}, consulapi.TCPService{},
			"rule 0: backendRef other/b did not resolve (see the route's ResolvedRefs condition); the rule is left out of Consul", []gwdecision.BackendRefIndex{{Rule: 0, Ref: 1}}},
		{"an unresolved backendRef of another rule", []gatewayv1.BackendRef{backendRef("", "a", 1, nil)}, consulapi.TCPService{Name: "a"}, "", []gwdecision.BackendRefIndex{{Rule: 1, Ref: 0}}},
	}
	for _, tt := range tests {
		got, _, problem := tr.tcpRule("apps", 0, gatewayv1.TCPRouteRule{BackendRefs: tt.refs}, gwdecision.Route{UnresolvedBackends: tt.unresolved})
		if problem != tt.wantProblem {
			t.Errorf("%s: problem %q, want %q", tt.name, problem, tt.wantProblem)
		}
		if diff := gocmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}
