package translate

import (
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	gwdecision "github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

func TestRouteParents(t *testing.T) {
	s := snapshotOf(confirmedGateway("infra", "gw", true, validListener(httpListener("http", 80, "")), validListener(tcpListener("tcp", 9000))))
	tr := newPass(Naming{Partition: "p"}, testOwnership, Options{})
	tr.snap = s
	gw := cache.ObjectName{Namespace: "infra", Name: "gw"}
	if pg := tr.translateObject(s.Gateways[gw], nil, func() { tr.gateway(gw, s.Gateways[gw]) }).gateway; pg != nil {
		tr.gateways[gw] = pg
	}
	route := cache.ObjectName{Namespace: "apps", Name: "r"}

	parents, dropped := tr.routeParents("HTTPRoute", route, []gwdecision.Attachment{
		attachment("infra", "gw", "http"),
		attachment("infra", "gw", "http", "tcp"), // the same listener again, and a tcp one
		attachment("infra", "missing", "http"),   // a Gateway without entry
	}, "http")
	want := []consulapi.ResourceReference{{Kind: consulapi.APIGateway, Name: "gw.infra", SectionName: "http", Partition: "p"}}
	if diff := gocmp.Diff(want, parentRefs(parents)); diff != "" {
		t.Errorf("parents (-want +got):\n%s", diff)
	}
	// The tcp listener is the problem of that parent alone: the route is written for
	// the http one.
	wantDropped := []droppedParent{{ProblemParent{gw, "tcp"}, "listener infra/gw/tcp is a tcp listener in Consul; the route is left out of it"}}
	if diff := gocmp.Diff(wantDropped, dropped, gocmp.AllowUnexported(droppedParent{})); diff != "" {
		t.Errorf("dropped parents (-want +got):\n%s", diff)
	}
	if tr.out != nil && len(tr.out.problems) != 0 {
		t.Errorf("problems %v, want none of the whole route", tr.out.problems)
	}

	tr.out = nil
	if parents, _ := tr.routeParents("HTTPRoute", route, []gwdecision.Attachment{attachment("infra", "missing", "http"), attachment("infra", "gw", "nope")}, "http"); len(parents) != 0 {
		t.Errorf("parents without written listeners: %v", parents)
	}
	wantProblems := []Problem{{Kind: "HTTPRoute", Object: route, Message: "none of the listeners the route is accepted on is programmed in Consul (infra/missing/http, infra/gw/nope)"}}
	if diff := gocmp.Diff(wantProblems, tr.current().problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}

	tr.out = nil
	if parents, _ := tr.routeParents("HTTPRoute", route, nil, "http"); len(parents) != 0 || len(tr.current().problems) != 0 {
		t.Errorf("a route accepted nowhere: parents %v, problems %v", parents, tr.current().problems)
	}
}

// A route left out of one of its parent listeners is written for the others, and the
// problem names that parent; left out of every one, it is written nowhere, and the
// problems are the route's own.
func TestParentProblemsNameTheirParent(t *testing.T) {
	edge := cache.ObjectName{Namespace: "infra", Name: "edge"}
	route := cache.ObjectName{Namespace: "apps", Name: "r"}
	translateOn := func(gateways ...string) Desired {
		decision := gwdecision.Route{}
		for _, gw := range gateways {
			decision.Attachments = append(decision.Attachments, attachment("infra", gw, "http"))
		}
		return Translate(snapshotOf(
			// A wildcard route hostname narrower than the listener's: Consul cannot
			// serve it there.
			confirmedGateway("infra", "edge", true, validListener(httpListener("http", 80, "*.com"))),
			confirmedGateway("infra", "named", true, validListener(httpListener("http", 80, "a.example.com"))),
			newConfirmedHTTPRoute("apps", "r", []string{"*.example.com"}, decision, gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "web", 8080, nil)}}),
		), Naming{}, testOwnership, Options{})
	}

	d := translateOn("edge", "named")
	entry, _ := d.Entries[EntryKey{Kind: consulapi.HTTPRoute, Name: "r.apps"}].(*consulapi.HTTPRouteConfigEntry)
	if entry == nil || len(entry.Parents) != 1 || entry.Parents[0].Name != "named.infra" {
		t.Fatalf("http-route %+v, want one for named", entry)
	}
	if len(d.Problems) != 1 || d.Problems[0].Object != route || d.Problems[0].Parent != (ProblemParent{edge, "http"}) {
		t.Errorf("problems %+v, want one of parent infra/edge/http", d.Problems)
	}

	d = translateOn("edge")
	if len(d.Problems) != 1 || d.Problems[0].Parent != (ProblemParent{}) {
		t.Errorf("route written nowhere: problems %+v, want one of the whole route", d.Problems)
	}
}
