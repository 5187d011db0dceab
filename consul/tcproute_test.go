package consul

import (
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestTCPRuleBackends(t *testing.T) {
	tr := &translator{snap: snapshotOf(backendService("apps", "a", 1), backendService("apps", "b", 1))}
	tests := []struct {
		name        string
		refs        []gatewayv1.BackendRef
		want        consulapi.TCPService
		wantProblem string
	}{
		{"one", []gatewayv1.BackendRef{backendRef("", "a", 1, nil)}, consulapi.TCPService{Name: "a"}, ""},
		{"weight 0 not counted", []gatewayv1.BackendRef{backendRef("", "a", 1, new(int32(0))), backendRef("", "b", 1, new(int32(5)))}, consulapi.TCPService{Name: "b"}, ""},
		{"none", []gatewayv1.BackendRef{backendRef("", "a", 1, new(int32(0)))}, consulapi.TCPService{}, "rule 0: no backendRef has a weight above 0; the rule is left out of Consul"},
		{"two", []gatewayv1.BackendRef{backendRef("", "a", 1, nil), backendRef("", "b", 1, nil)}, consulapi.TCPService{}, "rule 0: 2 backends would receive connections, but Consul's tcp-route forwards to a single service; the rule is left out of Consul"},
		{"missing", []gatewayv1.BackendRef{backendRef("", "c", 1, nil)}, consulapi.TCPService{}, "rule 0: backendRef apps/c names a Service that does not exist; the rule is left out of Consul"},
	}
	for _, tt := range tests {
		got, problem := tr.tcpRule("apps", 0, gatewayv1.TCPRouteRule{BackendRefs: tt.refs}, true)
		if problem != tt.wantProblem {
			t.Errorf("%s: problem %q, want %q", tt.name, problem, tt.wantProblem)
		}
		if diff := gocmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}
