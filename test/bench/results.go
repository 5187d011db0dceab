package main

import (
	"fmt"
	"slices"
)

// results are the measurements of one bench run, by number of routes.
type results struct {
	sizes    []int
	secretsN int
	idle     *idleRun
	cold     map[int]*coldRun
	fast     map[int]*coldRun
	coldSD   map[int]*coldRun // with --manage-service-defaults
	edit     map[int]*editRun
	restart  map[int]*handover
	failover map[int]*handover
	secrets  *coldRun
	side     *sideBySide
}

func newResults(cfg *config) *results {
	return &results{
		sizes: unionSizes(cfg.sizes, cfg.fastSizes), secretsN: cfg.secrets,
		cold: map[int]*coldRun{}, fast: map[int]*coldRun{}, coldSD: map[int]*coldRun{}, edit: map[int]*editRun{},
		restart: map[int]*handover{}, failover: map[int]*handover{},
	}
}

// rows is the table: per size, every scenario that ran, each figure next to its
// baseline.
func (r *results) rows() []row {
	var rows []row
	if r.idle != nil {
		rows = append(rows, row{scenario: "idle (0 routes, 1 GatewayClass)", figure: "peak RSS", value: mib(r.idle.peakRSS)},
			row{scenario: "idle (0 routes, 1 GatewayClass)", figure: "CPU", value: fmt.Sprintf("%.2f s", r.idle.cpu)})
	}
	for _, n := range r.sizes {
		if c := r.cold[n]; c != nil {
			rows = append(rows, r.coldRows(n, fmt.Sprintf("cold start, QPS %d/%d", defaultQPS, defaultBurst), c)...)
		}
		if c := r.coldSD[n]; c != nil {
			rows = append(rows, r.coldRows(n, coldSDName, c)...)
		}
		if c := r.fast[n]; c != nil {
			name := fmt.Sprintf("cold start, QPS %d/%d", fastQPS, fastBurst)
			if c.size.secrets > 0 {
				name += fmt.Sprintf(" + %d unrelated Secrets", c.size.secrets)
			}
			rows = append(rows, r.coldRows(n, name, c)...)
		}
		if e := r.edit[n]; e != nil {
			rows = append(rows, editRows(n, e)...)
		}
		if h := r.restart[n]; h != nil {
			rows = append(rows, handoverRows(n, "restart (SIGTERM, new process)", h, r.restartTotal(n), false)...)
		}
		if h := r.failover[n]; h != nil {
			rows = append(rows, handoverRows(n, "failover (SIGKILL the leader)", h, r.restartTotal(n), true)...)
		}
	}
	if s := r.secrets; s != nil {
		rows = append(rows, r.secretRows(s)...)
	}
	return append(rows, r.sideRows()...)
}

// coldSDName is the scenario cold-sd in the table.
var coldSDName = fmt.Sprintf("cold start, QPS %d/%d, --manage-service-defaults -v=2", defaultQPS, defaultBurst)

func (r *results) restartTotal(n int) int {
	l := newLayout(n, 0)
	return l.routes + l.gateways
}

func (r *results) coldRows(n int, scenario string, c *coldRun) []row {
	l := c.size
	target := 2*l.routes + 2*l.gateways
	entries := l.entries()
	rows := []row{}
	add := func(figure, value, baseline, ratio string) {
		rows = append(rows, row{size: n, scenario: scenario, figure: figure, value: value, baseline: baseline, ratio: ratio})
	}
	if f := c.floors; f != nil {
		add("time to converge (statuses final, entries judged)", seconds(c.converge),
			fmt.Sprintf("status floor (a): %d UpdateStatus at the same QPS in %s", f.status.writes, seconds(f.status.elapsed)),
			ratio(c.converge.Seconds(), f.status.elapsed.Seconds()))
		add("time to converge", seconds(c.converge),
			fmt.Sprintf("Consul write floor (b): %d CAS, %d workers, in %s", f.consul.writes, consulWorkers, seconds(f.consul.elapsed)),
			ratio(c.converge.Seconds(), f.consul.elapsed.Seconds()))
		add("time to converge", seconds(c.converge),
			fmt.Sprintf("Consul judging floor (c): the same %d CAS until Consul accepted every entry, in %s", f.judged.writes, seconds(f.judged.elapsed)),
			ratio(c.converge.Seconds(), f.judged.elapsed.Seconds()))
	} else {
		add("time to converge (statuses final, entries judged)", seconds(c.converge), "", "")
	}
	add("status writes (the API server's count)", c.server.statusText(),
		fmt.Sprintf("target for Gateways + routes: ≤ 2×routes + 2×Gateways = %d", target), ratio(c.server.objectStatusWrites(), float64(target)))
	add("status writes (the controller's own count)", c.counters.statusText(), "", "")
	add("API requests (all)", c.counters.apiText(), "", "")
	add("Consul writes (the controller's own count)", c.counters.consulText(),
		fmt.Sprintf("one per entry: %d", entries), ratio(c.counters.consulWrites, float64(entries)))
	add("Consul writes (Consul's indexes)", c.server.consulText(), "", "")
	if d := disagreement(c.counters, c.server); d != "" {
		add("the controller's counts against the servers'", d, "", "")
	}
	if f := c.floors; f != nil {
		add("CPU (controller process)", fmt.Sprintf("%.1f s", c.counters.cpu),
			fmt.Sprintf("floors (a)+(c), bench process: %.1f s", f.cpu()), ratio(c.counters.cpu, f.cpu()))
	} else {
		add("CPU (controller process)", fmt.Sprintf("%.1f s", c.counters.cpu), "", "")
	}
	add("peak RSS (VmHWM)", mib(c.peakRSS), r.idleBaseline(), r.idleRatio(c.peakRSS))
	return rows
}

func (r *results) idleBaseline() string {
	if r.idle == nil {
		return ""
	}
	return "0 routes: " + mib(r.idle.peakRSS)
}

func (r *results) idleRatio(peak int64) string {
	if r.idle == nil {
		return ""
	}
	return ratio(float64(peak), float64(r.idle.peakRSS))
}

func editRows(n int, e *editRun) []row {
	scenario := fmt.Sprintf("edit (%d route path edits, one at a time)", len(e.toConsul))
	var toConsulFloor, toStatusFloor []float64
	if e.floor != nil {
		toConsulFloor, toStatusFloor = e.floor.toConsul, e.floor.status
	}
	rows := []row{
		editRow(n, scenario, "API write → Consul entry, p50 / p99 / max", e.toConsul, "status write + CAS, direct", toConsulFloor),
		editRow(n, scenario, "API write → Consul judged the entry, p50 / p99 / max", e.toJudged, "", nil),
		editRow(n, scenario, "API write → route status final with Consul's verdict on the new entry, p50 / p99 / max", e.toStatus, "status write alone, direct", toStatusFloor),
		{size: n, scenario: scenario, figure: "first edit (warm-up; counted in the figures above)", value: fmt.Sprintf("%s to Consul, %s to final", millis(e.toConsul[0]), millis(e.toStatus[0]))},
	}
	edits := float64(len(e.toConsul))
	for _, st := range e.stages {
		rows = append(rows, row{size: n, scenario: scenario, figure: "stage mean: " + st.label,
			value: fmt.Sprintf("%s × %.1f per edit", millis(st.delta.mean), st.delta.count/edits)})
	}
	return rows
}

// editRow is one latency figure next to its floor, compared at p99.
func editRow(n int, scenario, figure string, v []float64, floorName string, floor []float64) row {
	r := row{size: n, scenario: scenario, figure: figure, value: latencySummary(v)}
	if len(floor) > 0 && len(v) > 0 {
		r.baseline = floorName + ": " + latencySummary(floor)
		r.ratio = ratio(percentile(v, 99), percentile(floor, 99)) + " (p99)"
	}
	return r
}

func handoverRows(n int, scenario string, h *handover, objects int, failover bool) []row {
	rows := []row{}
	add := func(figure, value, baseline, ratio string) {
		rows = append(rows, row{size: n, scenario: scenario, figure: figure, value: value, baseline: baseline, ratio: ratio})
	}
	if failover {
		add("new leader holds the Lease after", seconds(h.leaderIn),
			"lease duration "+seconds(leaseDuration), ratio(h.leaderIn.Seconds(), leaseDuration.Seconds()))
	} else {
		add("new process holds the Lease after", seconds(h.leaderIn), "", "")
		add("old process exit code", fmt.Sprint(h.exitCode), "0", "")
	}
	add("status writes (the API server's count)", h.server.statusText(), "0 (nothing changed)", "")
	add("status writes by the new process (its own count)", h.counters.statusText(), "0 (nothing changed)", "")
	add("Consul writes by the new process (its own count)", h.counters.consulText(), "0 (nothing changed)", "")
	add("Consul writes (Consul's indexes)", h.server.consulText(), "0 entries written", "")
	add("status changes seen by the watch", fmt.Sprint(h.flaps.statusUpdates), "0", "")
	add("objects not final at some time", fmt.Sprintf("%d of %d", h.flaps.objects, objects), "0", "")
	add("not-final time, sum / max over objects", fmt.Sprintf("%s / %s", seconds(h.flaps.sum), seconds(h.flaps.max)),
		"0 s", "")
	add("observed for (signal → settled)", seconds(h.observeFor), "", "")
	return rows
}

func (r *results) secretRows(s *coldRun) []row {
	n := s.size.routes
	scenario := fmt.Sprintf("cold start + %d unrelated Secrets, QPS %d/%d", s.size.secrets, fastQPS, fastBurst)
	rows := []row{}
	add := func(figure, value, baseline, ratio string) {
		rows = append(rows, row{size: n, scenario: scenario, figure: figure, value: value, baseline: baseline, ratio: ratio})
	}
	without := r.fast[n]
	if without == s {
		without = nil // the same run: its rows are above
	}
	if without != nil {
		add("time to converge", seconds(s.converge), "without the Secrets: "+seconds(without.converge),
			ratio(s.converge.Seconds(), without.converge.Seconds()))
		add("peak RSS (VmHWM)", mib(s.peakRSS), "without the Secrets: "+mib(without.peakRSS),
			ratio(float64(s.peakRSS), float64(without.peakRSS)))
	} else {
		add("time to converge", seconds(s.converge), "", "")
	}
	add("peak RSS (VmHWM)", mib(s.peakRSS), r.idleBaseline(), r.idleRatio(s.peakRSS))
	add("Secrets in the controller's cache", fmt.Sprint(s.counters.cachedSecrets), "0: no listener names them", "")
	return rows
}

// charts are the plot: convergence time and peak RSS against the number of routes.
func (r *results) charts() []chart {
	conv := chart{title: "Cold start: time to converge", xLabel: "routes", yLabel: "seconds"}
	rss := chart{title: "Peak RSS of the controller", xLabel: "routes", yLabel: "MiB"}
	coldName := fmt.Sprintf("QPS %d/%d", defaultQPS, defaultBurst)
	fastName := fmt.Sprintf("QPS %d/%d", fastQPS, fastBurst)
	runs := []struct {
		name  string
		color string
		m     map[int]*coldRun
	}{{coldName, "#1f77b4", r.cold}, {fastName, "#ff7f0e", r.fast}}
	for _, run := range runs {
		var c, m []point
		for _, n := range sortedKeys(run.m) {
			c = append(c, point{float64(n), run.m[n].converge.Seconds()})
			m = append(m, point{float64(n), mebibytes(run.m[n].peakRSS)})
		}
		conv.series = append(conv.series, series{name: run.name, color: run.color, points: c})
		rss.series = append(rss.series, series{name: run.name, color: run.color, points: m})
	}
	if s := r.secrets; s != nil {
		name := fmt.Sprintf("%s + %d Secrets", fastName, s.size.secrets)
		conv.series = append(conv.series, series{name: name, color: "#2ca02c", points: []point{{float64(s.size.routes), s.converge.Seconds()}}})
		rss.series = append(rss.series, series{name: name, color: "#2ca02c", points: []point{{float64(s.size.routes), mebibytes(s.peakRSS)}}})
	}
	if r.idle != nil {
		rss.series = append(rss.series, series{name: "0 routes", color: "#7f7f7f", dashed: true, hline: true,
			points: []point{{0, mebibytes(r.idle.peakRSS)}}})
	}
	return []chart{conv, rss}
}

func mebibytes(b int64) float64 { return float64(b) / (1 << 20) }

func sortedKeys[V any](m map[int]V) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
