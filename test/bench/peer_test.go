package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// apiserverMetrics is the shape of kube-apiserver's /metrics for the series
// apiCountsOf reads, with others around them.
const apiserverMetrics = `# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="gateway.networking.k8s.io",resource="httproutes",scope="resource",subresource="status",verb="PUT",version="v1"} 100
apiserver_request_total{code="409",component="apiserver",dry_run="",group="gateway.networking.k8s.io",resource="httproutes",scope="resource",subresource="status",verb="PUT",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="gateway.networking.k8s.io",resource="gateways",scope="resource",subresource="status",verb="PATCH",version="v1"} 5
apiserver_request_total{code="200",component="apiserver",dry_run="",group="gateway.networking.k8s.io",resource="httproutes",scope="namespace",subresource="",verb="LIST",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="gateway.networking.k8s.io",resource="httproutes",scope="namespace",subresource="",verb="WATCH",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 40
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="GET",version="v1"} 41
apiserver_request_total{code="201",component="apiserver",dry_run="",group="apps",resource="deployments",scope="resource",subresource="",verb="POST",version="v1"} 5
apiserver_request_total{code="200",component="",dry_run="",group="",resource="",scope="",subresource="",verb="GET",version=""} 7
# HELP apiserver_longrunning_requests [STABLE] Gauge of all active long-running apiserver requests.
# TYPE apiserver_longrunning_requests gauge
apiserver_longrunning_requests{component="apiserver",group="gateway.networking.k8s.io",resource="httproutes",scope="namespace",subresource="",verb="WATCH",version="v1"} 2
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="namespace",subresource="exec",verb="CONNECT",version="v1"} 4
apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="",resource="",scope="",subresource="",verb="GET",version="",le="+Inf"} 7
`

func TestAPICountsOf(t *testing.T) {
	c, err := apiCountsOf(apiserverMetrics)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.statusWriteTotal(); got != 108 {
		t.Errorf("status writes = %v, want 108 (conflicts count: the server served them)", got)
	}
	if diff := cmp.Diff(map[string]float64{"httproutes": 103, "gateways": 5}, c.statusWrites); diff != "" {
		t.Errorf("status writes by resource (-want +got):\n%s", diff)
	}
	// Open watches count with the ended ones; other long-running requests do not.
	if got := c.requests["WATCH"]; got != 3 {
		t.Errorf("WATCH = %v, want 3", got)
	}
	if got := c.byResource["-"]; got != 7 {
		t.Errorf("non-resource requests = %v, want 7", got)
	}
	if got := c.requestTotal(); got != 100+3+5+2+3+40+41+5+7 {
		t.Errorf("requests = %v", got)
	}
	if got := c.writesBesidesLeases(); got != 100+3+5+5 {
		t.Errorf("writes besides leases = %v, want 113", got)
	}
	if _, err := apiCountsOf("# nothing\n"); err == nil {
		t.Error("a /metrics without apiserver_request_total was accepted")
	}
}

func TestAPICountsMinus(t *testing.T) {
	before, err := apiCountsOf(apiserverMetrics)
	if err != nil {
		t.Fatal(err)
	}
	after, err := apiCountsOf(strings.NewReplacer(
		`subresource="status",verb="PUT",version="v1"} 100`, `subresource="status",verb="PUT",version="v1"} 150`,
		`verb="GET",version=""} 7`, `verb="GET",version=""} 12`,
		// A watch that ended: one more counted, one fewer open.
		`verb="WATCH",version="v1"} 1`, `verb="WATCH",version="v1"} 2`,
		`subresource="",verb="WATCH",version="v1"} 2`, `subresource="",verb="WATCH",version="v1"} 1`,
	).Replace(apiserverMetrics))
	if err != nil {
		t.Fatal(err)
	}
	d := after.minus(before)
	if diff := cmp.Diff(map[string]float64{"httproutes": 50}, d.statusWrites); diff != "" {
		t.Errorf("status writes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]float64{"PUT": 50, "GET": 5}, d.requests); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if got := d.requestTotal(); got != 55 {
		t.Errorf("requests = %v, want 55", got)
	}
}

func TestPeerFinal(t *testing.T) {
	l := layout{routes: 45, gateways: 2}
	if got := []int32{l.routesOf(0), l.routesOf(1)}; !cmp.Equal(got, []int32{23, 22}) {
		t.Errorf("routesOf = %v, want [23 22]", got)
	}
	route := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
	route.Status.Parents = []gatewayv1.RouteParentStatus{
		{ControllerName: controllerName, Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, ObservedGeneration: 2}}},
		{ControllerName: peerControllerName, Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, ObservedGeneration: 1}}},
	}
	if attachedRouteFinal(route, peerControllerName) {
		t.Error("a route Accepted at an older generation is final")
	}
	route.Status.Parents[1].Conditions[0].ObservedGeneration = 2
	if !attachedRouteFinal(route, peerControllerName) {
		t.Error("a route Accepted by the peer at its generation is not final")
	}
	gw := &gatewayv1.Gateway{Spec: gatewayv1.GatewaySpec{Listeners: []gatewayv1.Listener{{Name: "http"}}}}
	if attachedGatewayFinal(gw, 20) {
		t.Error("a Gateway without listener status is final")
	}
	gw.Status.Listeners = []gatewayv1.ListenerStatus{{Name: "http", AttachedRoutes: 19}}
	if attachedGatewayFinal(gw, 20) {
		t.Error("a Gateway with 19 of 20 routes attached is final")
	}
	gw.Status.Listeners[0].AttachedRoutes = 20
	if !attachedGatewayFinal(gw, 20) {
		t.Error("a Gateway with every route attached is not final")
	}
}
