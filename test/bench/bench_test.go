package main

import (
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// These tests cover the pure parts of the bench; they need no server.

const exposition = `# HELP consul_gateway_controller_status_writes_total Status writes.
# TYPE consul_gateway_controller_status_writes_total counter
consul_gateway_controller_status_writes_total{kind="Gateway",result="ok"} 10
consul_gateway_controller_status_writes_total{kind="HTTPRoute",result="ok"} 200
consul_gateway_controller_status_writes_total{kind="HTTPRoute",result="conflict"} 3
workqueue_queue_duration_seconds_bucket{name="httproute",le="+Inf"} 40
workqueue_queue_duration_seconds_sum{name="httproute"} 2
workqueue_queue_duration_seconds_count{name="httproute"} 40
odd_label{v="a \"quoted\", comma\\n"} 1.5e+00 1700000000000
process_cpu_seconds_total 12.5
`

func TestParseScrape(t *testing.T) {
	m, err := parseScrape(exposition)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.sum(seriesStatusWrites, nil); got != 213 {
		t.Errorf("status writes = %v, want 213", got)
	}
	if got := m.sum(seriesStatusWrites, map[string]string{"result": "conflict"}); got != 3 {
		t.Errorf("conflicts = %v, want 3", got)
	}
	if got := m.sum("odd_label", map[string]string{"v": `a "quoted", comma\n`}); got != 1.5 {
		t.Errorf("escaped label value: sum = %v, want 1.5", got)
	}
	if diff := cmp.Diff([]string{"Gateway", "HTTPRoute"}, m.labelValues(seriesStatusWrites, "kind")); diff != "" {
		t.Errorf("labelValues (-want +got):\n%s", diff)
	}
	if _, err := parseScrape(`broken{a="b" 1`); err == nil {
		t.Error("an unterminated label set parsed")
	}
}

func TestDeltaHistogram(t *testing.T) {
	before, _ := parseScrape(exposition)
	after, _ := parseScrape(strings.NewReplacer(
		`_sum{name="httproute"} 2`, `_sum{name="httproute"} 3`,
		`_count{name="httproute"} 40`, `_count{name="httproute"} 50`).Replace(exposition))
	d := deltaHistogram(before, after, "workqueue_queue_duration_seconds", map[string]string{"name": "httproute"})
	if !d.ok || d.count != 10 || d.mean != 0.1 {
		t.Errorf("delta = %+v, want 10 observations of mean 0.1", d)
	}
	if d := deltaHistogram(before, after, "consul_gateway_controller_translate_duration_seconds", nil); d.ok {
		t.Errorf("a histogram the controller does not expose = %+v, want !ok", d)
	}
}

func TestPercentile(t *testing.T) {
	values := []float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	for _, tc := range []struct{ p, want float64 }{{50, 5}, {99, 10}, {100, 10}, {10, 1}, {0, 1}} {
		if got := percentile(values, tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("p50 of nothing = %v, want 0", got)
	}
	if values[0] != 5 {
		t.Error("percentile sorted its input in place")
	}
}

func TestNotFinalWithin(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	history := []transition{{at(0), false}, {at(5), true}, {at(20), false}, {at(23), true}, {at(40), false}}
	for _, tc := range []struct {
		name     string
		from, to int
		want     time.Duration
	}{
		{"before the first transition counts as not final", -5, 5, 10 * time.Second},
		{"a flap inside the window", 10, 30, 3 * time.Second},
		{"final throughout", 24, 39, 0},
		{"open at the end", 30, 45, 5 * time.Second},
		{"window starts inside a flap", 21, 30, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := notFinalWithin(history, at(tc.from), at(tc.to)); got != tc.want {
				t.Errorf("notFinalWithin = %v, want %v", got, tc.want)
			}
		})
	}
	stats := windowStats(map[string][]transition{"a": history, "b": {{at(0), true}}},
		[]time.Time{at(1), at(21), at(50)}, at(10), at(30))
	want := flapStats{statusUpdates: 1, objects: 1, sum: 3 * time.Second, max: 3 * time.Second}
	if stats != want {
		t.Errorf("windowStats = %+v, want %+v", stats, want)
	}
}

func TestRouteFinal(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus, gen int64) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, ObservedGeneration: gen}
	}
	route := func(gen int64, controller gatewayv1.GatewayController, conds ...metav1.Condition) *gatewayv1.HTTPRoute {
		r := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Generation: gen}}
		r.Status.Parents = []gatewayv1.RouteParentStatus{{ControllerName: controller, Conditions: conds}}
		return r
	}
	all := func(gen int64, consul metav1.ConditionStatus) []metav1.Condition {
		return []metav1.Condition{cond("Accepted", metav1.ConditionTrue, gen), cond("ResolvedRefs", metav1.ConditionTrue, gen),
			cond(consulAcceptedCondition, consul, gen)}
	}
	for _, tc := range []struct {
		name  string
		route *gatewayv1.HTTPRoute
		want  bool
	}{
		{"all true at the generation", route(2, controllerName, all(2, metav1.ConditionTrue)...), true},
		{"observed an older generation", route(3, controllerName, all(2, metav1.ConditionTrue)...), false},
		{"Consul has not accepted", route(2, controllerName, all(2, metav1.ConditionFalse)...), false},
		{"another controller's parent", route(2, floorController, all(2, metav1.ConditionTrue)...), false},
		{"no status", &gatewayv1.HTTPRoute{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := routeFinal(tc.route, controllerName); got != tc.want {
				t.Errorf("routeFinal = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRenderTable(t *testing.T) {
	got := renderTable([]row{{size: 100, scenario: "cold", figure: "a|b", value: "1 s", baseline: "", ratio: ratio(1, 0)}})
	want := "| routes | scenario | figure | controller | baseline | controller / baseline |\n" +
		"| ---: | --- | --- | ---: | --- | ---: |\n" +
		"| 100 | cold | a\\|b | 1 s | – | – |\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("renderTable (-want +got):\n%s", diff)
	}
}

func TestNiceCeil(t *testing.T) {
	for _, tc := range []struct{ in, want float64 }{{0, 1}, {1, 1}, {1.2, 2}, {3, 5}, {7, 10}, {5000, 5000}, {5001, 10000}, {0.03, 0.05}} {
		if got := niceCeil(tc.in); got != tc.want {
			t.Errorf("niceCeil(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestRenderSVGIsWellFormed(t *testing.T) {
	svg := renderSVG("title <&>", []chart{
		{title: "time", xLabel: "routes", yLabel: "s", series: []series{
			{name: "QPS 20/30", color: "#000", points: []point{{1000, 40}, {5000, 300}}},
			{name: "one point", color: "#111", points: []point{{5000, 100}}},
		}},
		{title: "rss", xLabel: "routes", yLabel: "MiB", series: []series{
			{name: "0 routes", color: "#222", hline: true, dashed: true, points: []point{{0, 30}}},
		}},
	})
	dec := xml.NewDecoder(strings.NewReader(svg))
	elements := map[string]int{}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok {
			elements[se.Name.Local]++
		}
	}
	if elements["svg"] != 1 || elements["polyline"] != 1 || elements["circle"] != 3 {
		t.Errorf("elements = %v, want one svg, one polyline (the two-point series), three circles", elements)
	}
	if !strings.Contains(svg, "title &lt;&amp;&gt;") {
		t.Error("the title is not escaped")
	}
}

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-sizes=200,100,100", "-scenarios=cold,edit"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{100, 200}, cfg.sizes); diff != "" {
		t.Errorf("sizes (-want +got):\n%s", diff)
	}
	if !cfg.smoke || !cfg.scenarios["edit"] || cfg.scenarios["restart"] {
		t.Errorf("cfg = %+v", cfg)
	}
	for _, bad := range [][]string{{"-sizes=0"}, {"-scenarios=cold,warm"}, {"-edit-wait=sometimes"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%v) accepted it", bad)
		}
	}
}

func TestTargets(t *testing.T) {
	res := &results{
		sizes: []int{100},
		cold: map[int]*coldRun{100: {
			size:     newLayout(100, 0),
			converge: 12 * time.Second,
			counters: counters{statusWrites: 212, statusByKind: map[string]float64{"HTTPRoute": 200, "Gateway": 12}, consulWrites: 110, cpu: 10},
			server:   serverCounts{api: apiCounts{statusWrites: map[string]float64{"httproutes": 200, "gateways": 12}}, entriesWritten: 105, raftApplied: 300},
			floors: &floors{status: floorResult{elapsed: 10 * time.Second, cpu: 1}, consul: floorResult{elapsed: time.Second},
				judged: floorResult{elapsed: 11 * time.Second, cpu: 2}},
			peakRSS: 100 << 20,
		}},
		fast: map[int]*coldRun{100: {size: newLayout(100, 0), counters: counters{consulWrites: 105},
			server: serverCounts{entriesWritten: 105, raftApplied: 300}, peakRSS: 160 << 20}},
		// With service-defaults: 100 routes + 2×5 Gateways = 110 entries.
		coldSD: map[int]*coldRun{100: {size: layout{routes: 100, gateways: 5, serviceDefaults: true}, counters: counters{consulWrites: 112},
			server: serverCounts{entriesWritten: 110, raftApplied: 300}}},
		restart: map[int]*handover{100: {}},
		// The new process counted no status write; the API server served three.
		failover: map[int]*handover{100: {server: serverCounts{api: apiCounts{statusWrites: map[string]float64{"httproutes": 3}}}}},
		edit: map[int]*editRun{100: {toConsul: []float64{0.010, 0.020, 0.060},
			floor: &editFloor{toConsul: []float64{0.010, 0.020, 0.050}}}},
		secrets: &coldRun{size: newLayout(100, 1000), peakRSS: 290 << 20},
	}
	got := map[string]bool{}
	for _, tg := range res.targets() {
		got[tg.what] = tg.met
	}
	handover := "0 status writes (the API server's count), 0 Consul writes (the controller's count; 0 entries written by Consul's indexes), 0 conditions away from their final value"
	want := map[string]bool{
		"100 routes, cold start at QPS 20/30: status writes (the API server's count) ≤ 2×routes + 2×Gateways = 210":                false,
		"100 routes, cold start at QPS 20/30: Consul writes ≤ 1.02 per entry (105 entries), within what Consul's indexes show":     false,
		"100 routes, cold start at QPS 20/30: time to converge ≤ 1.3× max(floor (a), floor (c)) = (c) 11.0 s":                      true,
		"100 routes, cold start at QPS 20/30: controller CPU ≤ 3× the floors' CPU (3.0 s)":                                         false,
		"100 routes, cold start at QPS 1000/1000: status writes (the API server's count) ≤ 2×routes + 2×Gateways = 210":            true,
		"100 routes, cold start at QPS 1000/1000: Consul writes ≤ 1.02 per entry (105 entries), within what Consul's indexes show": true,
		"100 routes, restart: " + handover:  true,
		"100 routes, failover: " + handover: false,
		"100 routes: edit → Consul p99 ≤ 1.3× the direct floor's p99 (status write + CAS, 50.0 ms)": true,
		"100 routes: peak RSS ≤ 150 MiB (the higher of its cold starts)":                            false,
		"100 routes + 1000 unrelated Secrets: peak RSS ≤ 300 MiB":                                   true,

		"100 routes, cold start at QPS 20/30 with --manage-service-defaults: status writes (the API server's count) ≤ 2×routes + 2×Gateways = 210":            true,
		"100 routes, cold start at QPS 20/30 with --manage-service-defaults: Consul writes ≤ 1.02 per entry (110 entries), within what Consul's indexes show": true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}
	if table := renderTargets(res.targets()); !strings.Contains(table, "| 100 routes: peak RSS ≤ 150 MiB (the higher of its cold starts) | 160 MiB | no |") {
		t.Errorf("rendered targets lack the RSS row:\n%s", table)
	}
}

// TestDisagreement: the controller's own counts stand only where the servers' agree.
func TestDisagreement(t *testing.T) {
	server := serverCounts{api: apiCounts{statusWrites: map[string]float64{"httproutes": 20, "gateways": 2}}, entriesWritten: 11, raftApplied: 30}
	for _, tt := range []struct {
		name string
		own  counters
		want string
	}{
		{"agree", counters{statusWrites: 22, consulWrites: 12}, ""},
		// The smoke run's figures: 106 config entry writes and 5 service-intentions
		// against 110 entries of ours (the intentions among them) written.
		{"intentions among the entries written", counters{statusWrites: 22, consulWrites: 8, intentionWrites: 3}, ""},
		{"a status write not counted", counters{statusWrites: 21, consulWrites: 12},
			"the controller counted 21 status writes, the API server served 22"},
		{"fewer Consul writes than entries written", counters{statusWrites: 22, consulWrites: 10},
			"the controller counted 10 Consul writes, Consul holds 11 entries of ours written since the start"},
		{"more Consul writes than Raft applied", counters{statusWrites: 22, consulWrites: 25, intentionWrites: 6},
			"the controller counted 31 Consul writes, Consul's Raft log applied 30 entries"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := disagreement(tt.own, server); got != tt.want {
				t.Errorf("disagreement = %q, want %q", got, tt.want)
			}
		})
	}
}
