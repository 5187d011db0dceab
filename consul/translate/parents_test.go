package translate

import (
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/client-go/tools/cache"

	gwdecision "github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

func TestRouteParents(t *testing.T) {
	s := snapshotOf(confirmedGateway("infra", "gw", true, validListener(httpListener("http", 80, "")), validListener(tcpListener("tcp", 9000))))
	tr := newPass(s, Naming{Partition: "p"}, testOwnership, Options{})
	gw := cache.ObjectName{Namespace: "infra", Name: "gw"}
	if pg := tr.object(nil, s.Gateways[gw], nil, func() { tr.gateway(gw, s.Gateways[gw]) }).gateway; pg != nil {
		tr.gateways[gw] = pg
	}
	route := cache.ObjectName{Namespace: "apps", Name: "r"}

	parents := tr.routeParents("HTTPRoute", route, []gwdecision.Attachment{
		attachment("infra", "gw", "http"),
		attachment("infra", "gw", "http", "tcp"), // the same listener again, and a tcp one
		attachment("infra", "missing", "http"),   // a Gateway without entry
	}, "http")
	want := []consulapi.ResourceReference{{Kind: consulapi.APIGateway, Name: "gw.infra", SectionName: "http", Partition: "p"}}
	if diff := gocmp.Diff(want, parentRefs(parents)); diff != "" {
		t.Errorf("parents (-want +got):\n%s", diff)
	}
	wantProblems := []Problem{{Kind: "HTTPRoute", Object: route, Message: "listener infra/gw/tcp is a tcp listener in Consul; the route is left out of it"}}
	if diff := gocmp.Diff(wantProblems, tr.desired.Problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}

	tr.desired.Problems = nil
	if parents := tr.routeParents("HTTPRoute", route, []gwdecision.Attachment{attachment("infra", "missing", "http"), attachment("infra", "gw", "nope")}, "http"); len(parents) != 0 {
		t.Errorf("parents without written listeners: %v", parents)
	}
	wantProblems = []Problem{{Kind: "HTTPRoute", Object: route, Message: "none of the listeners the route is accepted on is programmed in Consul (infra/missing/http, infra/gw/nope)"}}
	if diff := gocmp.Diff(wantProblems, tr.desired.Problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}

	tr.desired.Problems = nil
	if parents := tr.routeParents("HTTPRoute", route, nil, "http"); len(parents) != 0 || len(tr.desired.Problems) != 0 {
		t.Errorf("a route accepted nowhere: parents %v, problems %v", parents, tr.desired.Problems)
	}
}
