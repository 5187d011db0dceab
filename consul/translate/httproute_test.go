package translate

import (
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	gwdecision "github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

func TestBackendWeight(t *testing.T) {
	for _, tt := range []struct {
		w    *int32
		want int
	}{{nil, 1}, {new(int32(0)), 0}, {new(int32(7)), 7}, {new(int32(-1)), 0}} {
		if got := backendWeight(tt.w); got != tt.want {
			t.Errorf("backendWeight(%v) = %d, want %d", tt.w, got, tt.want)
		}
	}
}

// TestRuleServicesWriteTheDecision: each backendRef is written as the decision
// resolved it, whatever it names: its Consul service (renamed, narrowed, a
// MeshService's) placed by the naming, and the share of one that did not resolve, or
// that the decision does not hold, goes to the blackhole.
func TestRuleServicesWriteTheDecision(t *testing.T) {
	refs := []gatewayv1.HTTPBackendRef{
		httpBackend("", "web", 8080, new(int32(5))),
		httpBackend("other", "api", 8080, new(int32(4))),
		httpBackend("", "billing", 0, new(int32(3))),
		httpBackend("", "gone", 8080, new(int32(2))),
		httpBackend("", "undecided", 8080, new(int32(1))),
		httpBackend("", "drained", 8080, new(int32(0))),
	}
	at := func(ref int) gwdecision.BackendRefIndex { return gwdecision.BackendRefIndex{Rule: 0, Ref: ref} }
	decision := gwdecision.Route{Backends: []gwdecision.Backend{
		{Ref: at(0), Resolved: true, Referent: cache.ObjectName{Namespace: "apps", Name: "web"}, Consul: "web-v2", Port: 8080, ServiceUID: "uid-web"},
		{Ref: at(1), Resolved: true, Referent: cache.ObjectName{Namespace: "other", Name: "api"}, Consul: "api", Port: 8080, Narrowed: true, ServiceUID: "uid-api"},
		{Ref: at(2), Resolved: true, Referent: cache.ObjectName{Namespace: "apps", Name: "billing"}, Consul: "billing-vm", MeshService: true},
		{Ref: at(3), Referent: cache.ObjectName{Namespace: "apps", Name: "gone"}},
		{Ref: at(5), Resolved: true, Referent: cache.ObjectName{Namespace: "apps", Name: "drained"}, Consul: "drained", Port: 8080},
	}}
	n := Naming{MirrorNamespaces: true, MirrorPrefix: "k-"}
	tr := &pass{naming: n}
	services, used, err := tr.ruleServices("apps", 0, refs, decision)
	if err != nil {
		t.Fatal(err)
	}
	wantServices := []consulapi.HTTPService{
		{Name: "web-v2", Namespace: "k-apps", Weight: 5},
		{Name: "consul_gateway_controller_other_api", Namespace: "k-other", Weight: 4},
		{Name: "billing-vm", Namespace: "k-apps", Weight: 3},
		tr.blackhole("apps", 3),
	}
	if diff := gocmp.Diff(wantServices, services); diff != "" {
		t.Errorf("services (-want +got):\n%s", diff)
	}
	wantUsed := []backend{
		{Service: cache.ObjectName{Namespace: "apps", Name: "web"}, Consul: "web-v2", UID: "uid-web"},
		{Service: cache.ObjectName{Namespace: "other", Name: "api"}, Consul: "api", Narrowed: true, UID: "uid-api"},
		{Service: cache.ObjectName{Namespace: "apps", Name: "billing"}, Consul: "billing-vm", MeshService: true},
	}
	if diff := gocmp.Diff(wantUsed, used, gocmp.AllowUnexported(backend{})); diff != "" {
		t.Errorf("backends (-want +got):\n%s", diff)
	}
}
