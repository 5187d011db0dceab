package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// The controller's series the bench reads (docs/metrics.md).
const (
	seriesStatusWrites = "consul_gateway_controller_status_writes_total"
	seriesConsulWrites = "consul_gateway_controller_consul_writes_total"
	seriesLeader       = "consul_gateway_controller_leader"
	seriesRequests     = "rest_client_requests_total"
	seriesCPU          = "process_cpu_seconds_total"
	seriesSecrets      = "consul_gateway_controller_informer_cached_secrets"
)

// counters are one controller process's totals from one scrape.
type counters struct {
	statusWrites    float64
	statusConflicts float64
	statusErrors    float64
	statusByKind    map[string]float64
	consulWrites    float64
	consulConflicts float64
	consulErrors    float64
	consulByOp      map[string]float64 // create, update, delete
	intentionWrites float64
	apiRequests     float64
	apiByMethod     map[string]float64
	cpu             float64
	// cachedSecrets is how many Secrets the controller's cache holds at the scrape.
	cachedSecrets float64
}

func countersOf(m scrape) counters {
	c := counters{
		statusWrites:    m.sum(seriesStatusWrites, nil),
		statusConflicts: m.sum(seriesStatusWrites, map[string]string{"result": "conflict"}),
		statusErrors:    m.sum(seriesStatusWrites, map[string]string{"result": "error"}),
		// Config entries only: the floors count one write per desired entry, and
		// the service-intentions the controller keeps (--manage-intentions) are
		// not among them; intentionWrites counts those.
		consulWrites:    m.sum(seriesConsulWrites, nil) - m.sum(seriesConsulWrites, intentionsKind),
		consulConflicts: m.sum(seriesConsulWrites, map[string]string{"result": "conflict"}) - m.sum(seriesConsulWrites, map[string]string{"kind": "service-intentions", "result": "conflict"}),
		consulErrors:    m.sum(seriesConsulWrites, map[string]string{"result": "error"}) - m.sum(seriesConsulWrites, map[string]string{"kind": "service-intentions", "result": "error"}),
		intentionWrites: m.sum(seriesConsulWrites, intentionsKind),
		statusByKind:    map[string]float64{},
		consulByOp:      map[string]float64{},
		apiRequests:     m.sum(seriesRequests, nil),
		apiByMethod:     map[string]float64{},
		cpu:             m.sum(seriesCPU, nil),
		cachedSecrets:   m.sum(seriesSecrets, nil),
	}
	for _, kind := range m.labelValues(seriesStatusWrites, "kind") {
		c.statusByKind[kind] = m.sum(seriesStatusWrites, map[string]string{"kind": kind})
	}
	for _, op := range m.labelValues(seriesConsulWrites, "operation") {
		c.consulByOp[op] = m.sum(seriesConsulWrites, map[string]string{"operation": op}) -
			m.sum(seriesConsulWrites, map[string]string{"kind": "service-intentions", "operation": op})
	}
	for _, method := range m.labelValues(seriesRequests, "method") {
		c.apiByMethod[method] = m.sum(seriesRequests, map[string]string{"method": method})
	}
	return c
}

// intentionsKind selects the writes of service-intentions entries.
var intentionsKind = map[string]string{"kind": "service-intentions"}

// writes is every write the process made, to either server: it stops growing once the
// process is idle.
func (c counters) writes() float64 { return c.statusWrites + c.consulWrites + c.intentionWrites }

func (c counters) statusText() string {
	return fmt.Sprintf("%.0f (%s; conflict %.0f, error %.0f)", c.statusWrites, breakdown(c.statusByKind), c.statusConflicts, c.statusErrors)
}

func (c counters) consulText() string {
	return fmt.Sprintf("%.0f (%s; conflict %.0f, error %.0f)", c.consulWrites, breakdown(c.consulByOp), c.consulConflicts, c.consulErrors)
}

func (c counters) apiText() string {
	return fmt.Sprintf("%.0f (%s)", c.apiRequests, breakdown(c.apiByMethod))
}

// breakdown is "k1 n1, k2 n2" in key order.
func breakdown(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func scrapeController(ctx context.Context, ctl *testenv.Controller) (scrape, error) {
	text, err := ctl.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	return parseScrape(text)
}

// settle waits until the process is idle: every status final and, for cfg.quiet, no
// status change delivered by the watch, no write counted in its /metrics and its work
// queues empty. It returns the last scrape.
func (s *stack) settle(ctx context.Context, ctl *testenv.Controller) (scrape, error) {
	ctx, cancel := whileRunning(ctx, s.cfg.timeout, ctl)
	defer cancel()
	last, changed := -1.0, time.Now()
	for {
		m, err := scrapeController(ctx, ctl)
		if err != nil {
			return nil, err
		}
		now := time.Now()
		// A queue with items or work in progress is activity too: a new leader may
		// judge for a while before its first write, and settling must not end first.
		busy := m.sum("workqueue_depth", nil)+m.sum("workqueue_unfinished_work_seconds", nil) > 0
		if w := countersOf(m).writes(); w != last || busy {
			last, changed = w, now
		}
		quietSince := changed
		if lc := s.tracker.lastChange(); lc.After(quietSince) {
			quietSince = lc
		}
		if s.tracker.allFinal() && now.Sub(quietSince) >= s.cfg.quiet {
			return m, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s to settle: %w (%s)", ctl.Name(), context.Cause(ctx), s.tracker.summary())
		case <-time.After(time.Second):
		}
	}
}

// waitLeader polls /metrics until the process says it holds the Lease and returns
// when it saw that.
func (s *stack) waitLeader(ctx context.Context, ctl *testenv.Controller) (time.Time, error) {
	ctx, cancel := whileRunning(ctx, s.cfg.timeout, ctl)
	defer cancel()
	for {
		if m, err := scrapeController(ctx, ctl); err == nil && m.sum(seriesLeader, nil) == 1 {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("waiting for %s to lead: %w", ctl.Name(), context.Cause(ctx))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// saveHeapProfile writes ctl's heap profile next to its log, as <log>.heap.pb.gz
// (read it with go tool pprof -sample_index=inuse_space).
func saveHeapProfile(ctx context.Context, ctl *testenv.Controller) error {
	return saveProfile(ctx, ctl, "heap?gc=1", "heap")
}

// saveProfile writes the profile /debug/pprof/<query> of ctl next to its log, as
// <log>.<name>.pb.gz.
func saveProfile(ctx context.Context, ctl *testenv.Controller, query, name string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ctl.ProfilingAddr()+"/debug/pprof/"+query, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s profile of %s: %w", name, ctl.Name(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s profile of %s: %s", name, ctl.Name(), resp.Status)
	}
	path := strings.TrimSuffix(ctl.LogPath(), ".log") + "." + name + ".pb.gz"
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	logf("%s profile of %s: %s", name, ctl.Name(), path)
	return f.Close()
}
