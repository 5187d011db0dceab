package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// scaleStack is a namespace with a class, gateways Gateways of one HTTP listener, a
// Service per Gateway, and routesPerGateway HTTPRoutes on each: the shape of the scale
// issue's report, small enough for make test.
type scaleStack struct {
	testenv.Stack
	gateways         int
	routesPerGateway int
}

func newScaleStack(t *testing.T, ns string, gateways, routesPerGateway int) scaleStack {
	t.Helper()
	s := scaleStack{Stack: env.NewStack(t, ns), gateways: gateways, routesPerGateway: routesPerGateway}
	for g := range gateways {
		s.GatewayName, s.Backend = fmt.Sprintf("gw-%d", g), fmt.Sprintf("echo-%d", g)
		env.Create(t, testenv.Service(ns, s.Backend, testenv.BackendPort))
		env.Create(t, s.Gateway(s.GatewayName, testenv.HTTPListener("http", 18080)))
		for r := range routesPerGateway {
			route := s.Route(fmt.Sprintf("r-%d-%d", g, r))
			route.Spec.Rules[0].Matches = []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Value: new(fmt.Sprintf("/r-%d", r))}}}
			env.Create(t, route)
		}
	}
	return s
}

func (s scaleStack) routes() int { return s.gateways * s.routesPerGateway }

// args are the controller flags for this stack, on its own Lease.
func (s scaleStack) args(extra ...string) []string {
	return append([]string{
		"--controller-name=" + string(s.Controller), "--cluster-id=" + s.Namespace, "--manage-service-defaults", "-v=2",
		"--leader-elect-resource-namespace=" + s.Namespace, "--leader-elect-resource-name=" + s.Namespace,
	}, extra...)
}

// unsettled lists the objects whose status is not final yet: a Gateway Accepted and
// Programmed, a route Accepted, ResolvedRefs and ConsulAccepted on its parent. It also
// returns the resourceVersion of every object, by kind/name.
func (s scaleStack) unsettled(t *testing.T) (pending []string, versions map[string]string) {
	t.Helper()
	versions = map[string]string{}
	gws, err := env.GatewayClient.GatewayV1().Gateways(s.Namespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, gw := range gws.Items {
		versions["Gateway/"+gw.Name] = gw.ResourceVersion
		got := testenv.ConditionReason(gw.Status.Conditions, "Accepted") + " " + testenv.ConditionReason(gw.Status.Conditions, "Programmed")
		if got != "True/Accepted True/Programmed" {
			pending = append(pending, "Gateway "+gw.Name+": "+got)
		}
	}
	routes, err := env.GatewayClient.GatewayV1().HTTPRoutes(s.Namespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes.Items {
		versions["HTTPRoute/"+r.Name] = r.ResourceVersion
		var got string
		for _, p := range r.Status.Parents {
			if p.ControllerName == s.Controller {
				got = testenv.ConditionReason(p.Conditions, "Accepted") + " " + testenv.ConditionReason(p.Conditions, "ResolvedRefs") + " " + testenv.ConditionReason(p.Conditions, gwsync.ConsulAcceptedCondition)
			}
		}
		if got != "True/Accepted True/ResolvedRefs True/Accepted" {
			pending = append(pending, "HTTPRoute "+r.Name+": "+got)
		}
	}
	if len(gws.Items) != s.gateways || len(routes.Items) != s.routes() {
		t.Fatalf("found %d Gateways and %d routes, want %d and %d", len(gws.Items), len(routes.Items), s.gateways, s.routes())
	}
	return pending, versions
}

func (s scaleStack) waitSettled(t *testing.T, timeout time.Duration) map[string]string {
	t.Helper()
	var versions map[string]string
	testenv.Eventually(t, timeout, "every status is final", func(context.Context) error {
		var pending []string
		pending, versions = s.unsettled(t)
		if len(pending) > 0 {
			return fmt.Errorf("%d not final, first: %s", len(pending), pending[0])
		}
		return nil
	})
	return versions
}

// TestColdStartWritesTwicePerObjectAndRestartWritesNothing starts a controller on
// objects created before it, then replaces it with another one, as a rolling update
// or a failover does.
//
// Cold start: a route's status is written twice at most, its decision and then
// Consul's verdict, and a Gateway's twice too. Route status writes used to send every
// parent Gateway through a sync that raced the Gateway's own write into a 409, and a
// Consul verdict arriving before the informer delivered the first write did the same.
//
// Restart: the new leader reads what Consul already says before it judges, so it
// writes nothing, in the API server or in Consul, even when Consul answers slowly. It
// used to write every status twice: Pending, then Consul's verdict again.
func TestColdStartWritesTwicePerObjectAndRestartWritesNothing(t *testing.T) {
	s := newScaleStack(t, "scale-restart", 3, 20)

	first := startReplicaProcess(t, "first", s.args())
	s.waitSettled(t, 120*time.Second)
	time.Sleep(2 * time.Second) // anything still in flight shows in the counts
	body, err := first.process.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	routeWrites := testenv.MetricSum(body, "consul_gateway_controller_status_writes_total", `kind="HTTPRoute"`)
	gatewayWrites := testenv.MetricSum(body, "consul_gateway_controller_status_writes_total", `kind="Gateway"`)
	conflicts := testenv.MetricSum(body, "consul_gateway_controller_status_writes_total", `result="conflict"`)
	t.Logf("cold start of %d routes on %d Gateways: %v route and %v Gateway status writes, %v conflicts",
		s.routes(), s.gateways, routeWrites, gatewayWrites, conflicts)
	if limit := float64(2 * s.routes()); routeWrites > limit {
		t.Errorf("cold start made %v HTTPRoute status writes, want at most %v (decision, then Consul's verdict)", routeWrites, limit)
	}
	if limit := float64(2 * s.gateways); gatewayWrites > limit {
		t.Errorf("cold start made %v Gateway status writes, want at most %v", gatewayWrites, limit)
	}
	if conflicts != 0 {
		t.Errorf("cold start met %v conflicts; a controller alone on its objects should meet none", conflicts)
	}
	_, before := s.unsettled(t)
	if code, err := first.process.Terminate(30 * time.Second); err != nil || code != 0 {
		t.Fatalf("first replica: exit %d, %v", code, err)
	}

	// Consul answers the new leader's lists a second late: its first judgement must
	// still wait for Consul's verdicts.
	second := startReplicaProcess(t, "second", s.args(), withListDelay(time.Second))
	waitHolder(t, s.Namespace, s.Namespace, "second")
	testenv.Eventually(t, 60*time.Second, "the new leader judged every route", func(context.Context) error {
		body, err := second.process.Metrics(t.Context())
		if err != nil {
			return err
		}
		synced := testenv.MetricSum(body, "consul_gateway_controller_sync_duration_seconds_count", `queue="httproute"`)
		if synced < float64(s.routes()) {
			return fmt.Errorf("%v HTTPRoute syncs", synced)
		}
		return nil
	})
	time.Sleep(5 * time.Second) // the Consul syncer compares everything meanwhile
	if n := second.statusWrites(t); n != 0 {
		t.Errorf("the new leader made %d status writes against a converged system, want 0", n)
	}
	if n := second.consul.since(time.Time{}); n != 0 {
		t.Errorf("the new leader made %d Consul writes against a converged system, want 0", n)
	}
	_, after := s.unsettled(t)
	changed := 0
	for k, v := range before {
		if after[k] != v {
			changed++
		}
	}
	if changed > 0 {
		t.Errorf("%d objects changed while the new leader took over, want 0", changed)
	}
}

// TestLeaseHeldWhileStatusWritesSaturateTheClient runs the binary with a client budget
// far below what its backlog of status writes needs. Lease renewals used to wait in
// the same rate limiter behind them, miss the renew deadline, and the leader exited in
// the middle of its cold start ("leader election lost"), again on every restart.
func TestLeaseHeldWhileStatusWritesSaturateTheClient(t *testing.T) {
	s := newScaleStack(t, "scale-lease", 1, 30)
	r := startReplicaProcess(t, "saturated", s.args(
		"--kube-api-qps=1", "--kube-api-burst=1",
		"--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=500ms",
	))
	waitHolder(t, s.Namespace, s.Namespace, "saturated")
	// Every renewal must come in time for 20 s of saturation: ten renew deadlines.
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if !r.process.Running() {
			t.Fatalf("the leader exited under load:\n%s", testenv.Tail(r.process.Output(), 20))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if out := r.process.Output(); strings.Contains(out, "leader election lost") || strings.Contains(out, "Stopped leading") {
		t.Fatalf("the leader lost its Lease under load:\n%s", testenv.Tail(out, 20))
	}
	// The test proves something only if the client really was the bottleneck.
	if pending, _ := s.unsettled(t); len(pending) == 0 {
		t.Fatal("every status converged within the window: the client was not saturated, raise the route count")
	}
	if n := r.statusWrites(t); n == 0 {
		t.Error("the leader made no status write: it was not working")
	}
}

// TestColdStartWithLaggingCachesMeetsNoConflict runs the status pipeline and the
// syncer with watches that deliver Gateway and route events late, so every write's own
// event trails whatever enqueues the key next (route writes, Consul's verdicts). A key
// synced from a cache that has not seen our write used to be judged on the old status
// and written with the replaced resourceVersion: a 409 and a retry each time.
func TestColdStartWithLaggingCachesMeetsNoConflict(t *testing.T) {
	s := newScaleStack(t, "scale-lag", 2, 10)
	objects := s.gateways + s.routes()
	rc := startController(t, s.Controller, controllerOptions{
		watchDelay: 150 * time.Millisecond, delayResources: []string{"gateways", "httproutes"}, delayNamespace: s.Namespace,
		consul: &consulOptions{clusterID: s.Namespace, translation: translate.Options{ManageServiceDefaults: true}},
	})
	s.waitSettled(t, 120*time.Second)
	time.Sleep(2 * time.Second)
	if n := rc.statusWrites.count(http.StatusConflict); n != 0 {
		t.Errorf("met %d conflicts from its own lagging cache, want 0", n)
	}
	// Each object twice (decision, Consul's verdict) and the class once.
	if n, limit := rc.statusWrites.total(), 2*objects+1; n > limit {
		t.Errorf("made %d status writes for %d objects, want at most %d", n, objects, limit)
	}
}

// TestOneEditCostsItsOwnTranslationAndComparison edits one route among many converged
// ones. The syncer used to translate every object again for each batch of
// confirmations, and its drift watch decoded and compared every entry of a kind on
// each answer, so the cost of one change grew with the number of objects. Now the
// edit is translated alone, and the watch compares only the entries that changed.
func TestOneEditCostsItsOwnTranslationAndComparison(t *testing.T) {
	s := newScaleStack(t, "scale-edit", 2, 25)
	r := startReplicaProcess(t, "edit", s.args())
	s.waitSettled(t, 120*time.Second)
	time.Sleep(3 * time.Second) // the watch's answers to the last verdicts
	translated, compared := r.syncerWork(t)
	if translated < float64(s.gateways+s.routes()) {
		t.Fatalf("translated %v objects to converge %d, want each at least once", translated, s.gateways+s.routes())
	}

	route := "r-1-7"
	patch := []byte(`{"spec":{"rules":[{"matches":[{"path":{"type":"PathPrefix","value":"/edited"}}],"backendRefs":[{"name":"echo-1","port":8080}]}]}}`)
	if _, err := env.GatewayClient.GatewayV1().HTTPRoutes(s.Namespace).Patch(t.Context(), route, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	entry := translate.Naming{}.EntryName(s.Namespace, route)
	testenv.Eventually(t, 30*time.Second, "the edit reaches Consul", func(context.Context) error {
		e, _, err := env.ConsulClient.ConfigEntries().Get(consulapi.HTTPRoute, entry, nil)
		if err != nil {
			return err
		}
		r := e.(*consulapi.HTTPRouteConfigEntry)
		if len(r.Rules) != 1 || len(r.Rules[0].Matches) == 0 || !strings.HasPrefix(r.Rules[0].Matches[0].Path.Value, "/edited") {
			return fmt.Errorf("rules %+v", r.Rules)
		}

		return nil
	})
	s.waitSettled(t, 30*time.Second)
	time.Sleep(3 * time.Second)
	translatedAfter, comparedAfter := r.syncerWork(t)
	// The route's decision, then Consul's verdict on it, are two confirmations of it.
	if n := translatedAfter - translated; n > 3 {
		t.Errorf("one edit among %d routes translated %v objects, want at most 3", s.routes(), n)
	}
	// The edited entry after its write and after Consul's verdict on it; every other
	// entry matched before and did not change.
	t.Logf("one edit: %v objects translated, %v entries compared", translatedAfter-translated, comparedAfter-compared)
	if n := comparedAfter - compared; n > 4 {
		t.Errorf("one edit among %d routes made the drift watch compare %v entries, want at most 4", s.routes(), n)
	}
}

// syncerWork is how many objects the replica translated and how many entries its drift
// watch compared, from its /metrics.
func (r *replicaProcess) syncerWork(t *testing.T) (translated, compared float64) {
	t.Helper()
	body, err := r.process.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return testenv.MetricSum(body, "consul_gateway_controller_translated_objects_total"), testenv.MetricSum(body, "consul_gateway_controller_consul_entries_compared_total")
}

// TestColdStartCreatesEachEntryOnce starts a controller at QPS 20/30 with
// --manage-service-defaults whose drift watch gets each of Consul's answers 300 ms
// after Consul gave it, so the controller's own creates land between the two. Taking
// such an answer's word that an entry it had just created was missing, it created the
// entry again: a check-and-set refused, or, while Consul had not judged the entry
// yet, a create Consul answered true without writing, logged as a drift put back (a
// cold start of 1,000 routes on 50 Gateways made 1,172 writes for 1,100 entries).
func TestColdStartCreatesEachEntryOnce(t *testing.T) {
	s := newScaleStack(t, "scale-once", 2, 10)
	r := startReplicaProcess(t, "once", s.args("--kube-api-qps=20", "--kube-api-burst=30"), withStaleLists(300*time.Millisecond))
	s.waitSettled(t, 120*time.Second)
	// Per Gateway its api-gateway and its Service's service-defaults; per route its
	// http-route.
	entries := float64(s.routes() + 2*s.gateways)
	var writes, creates, conflicts, drift float64
	count := func(ctx context.Context) error {
		body, err := r.process.Metrics(ctx)
		if err != nil {
			return err
		}
		writes, creates, conflicts, drift = 0, 0, 0, 0
		for _, kind := range []string{consulapi.APIGateway, consulapi.HTTPRoute, consulapi.ServiceDefaults} {
			label := `kind="` + kind + `"`
			writes += testenv.MetricSum(body, "consul_gateway_controller_consul_writes_total", label)
			creates += testenv.MetricSum(body, "consul_gateway_controller_consul_writes_total", label, `operation="create"`)
			conflicts += testenv.MetricSum(body, "consul_gateway_controller_consul_writes_total", label, `result="conflict"`)
			drift += testenv.MetricSum(body, "consul_gateway_controller_consul_drift_corrections_total", label)
		}
		return nil
	}
	// Anything still in flight shows in the counts.
	time.Sleep(2 * time.Second)
	if err := count(t.Context()); err != nil {
		t.Fatal(err)
	}
	// At most once: in the package's shared Consul an earlier test may have left a
	// backend's service-defaults, which is then not created again.
	if creates > entries {
		t.Errorf("made %v creates for %v entries; want each entry created at most once", creates, entries)
	}
	if conflicts != 0 {
		t.Errorf("lost %v check-and-sets; a controller alone on its entries should lose none", conflicts)
	}
	if drift != 0 {
		t.Errorf("put back %v entries; nothing else wrote to Consul", drift)
	}

	// An entry removed outside the controller is still put back, from the first
	// answer that Consul gave after the delete.
	name := translate.Naming{}.EntryName(s.Namespace, "r-0-0")
	if _, err := env.ConsulClient.ConfigEntries().Delete(consulapi.HTTPRoute, name, nil); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the entry removed by hand is put back", func(ctx context.Context) error {
		_, _, err := env.ConsulClient.ConfigEntries().Get(consulapi.HTTPRoute, name, (&consulapi.QueryOptions{}).WithContext(ctx))
		return err
	})
}
