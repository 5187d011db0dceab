package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// coldRun is a controller started on objects that already exist, until it settled.
type coldRun struct {
	size     layout
	qps      float64
	burst    int
	converge time.Duration
	counters counters // the controller's own
	server   serverCounts
	peakRSS  int64
	floors   *floors
}

// coldStart starts a controller on the stack's objects and measures until every
// status is final and every entry is judged, then lets it settle to count its writes.
func (s *stack) coldStart(ctx context.Context, name string, qps float64, burst int) (*testenv.Controller, *coldRun, error) {
	apiBefore, err := s.apiserverCounts(ctx)
	if err != nil {
		return nil, nil, err
	}
	mark, err := s.markConsul(ctx)
	if err != nil {
		return nil, nil, err
	}
	start := time.Now()
	ctl, err := s.startController(name, qps, burst)
	if err != nil {
		return nil, nil, err
	}
	wctx, cancel := whileRunning(ctx, s.cfg.timeout, ctl)
	defer cancel()
	finalAt, err := s.tracker.waitAllFinal(wctx)
	if err != nil {
		return ctl, nil, err
	}
	consulAt, err := s.waitConsulJudged(wctx)
	if err != nil {
		return ctl, nil, err
	}
	run := &coldRun{size: s.size, qps: qps, burst: burst, converge: later(finalAt, consulAt).Sub(start)}
	logf("%s: %s converged in %s", s.name, name, seconds(run.converge))
	m, err := s.settle(ctx, ctl)
	if err != nil {
		return ctl, nil, err
	}
	run.counters = countersOf(m)
	if run.server, err = s.serverCountsSince(ctx, apiBefore, mark); err != nil {
		return ctl, nil, err
	}
	if d := disagreement(run.counters, run.server); d != "" {
		logf("%s: %s: the controller's counts and the servers' disagree: %s", s.name, name, d)
	}
	mem, err := ctl.Memory()
	if err != nil {
		return ctl, nil, err
	}
	run.peakRSS = mem.PeakRSS
	if s.cfg.profiles {
		if err := saveHeapProfile(ctx, ctl); err != nil {
			return ctl, nil, err
		}
	}
	if run.counters.cpu == 0 {
		// A controller without the process collector: read the kernel's account.
		if run.counters.cpu, err = ctl.CPUSeconds(); err != nil {
			return ctl, nil, err
		}
	}
	return ctl, run, nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// editRun is the edit phase: latencies from the API write returning to Consul
// holding the edited entry, and to the route's status final at the new generation.
type editRun struct {
	toConsul []float64 // seconds
	toJudged []float64 // Consul's status on the edited entry says Accepted
	toStatus []float64 // the route's status final and Consul judged the edit
	stages   []stage
	floor    *editFloor
}

// stage is one histogram's mean over the edit phase.
type stage struct {
	label string
	delta histogramDelta
}

// editStages are the pipeline's steps, in the order an edit passes them. The last two
// histograms exist only in controllers that expose them.
var editStages = []struct {
	label, series string
	want          map[string]string
	byLabel       string
}{
	{label: "httproute queue wait", series: "workqueue_queue_duration_seconds", want: map[string]string{"name": "httproute"}},
	{label: "httproute sync", series: "consul_gateway_controller_sync_duration_seconds", want: map[string]string{"queue": "httproute"}},
	{label: "API PUT", series: "rest_client_request_duration_seconds", want: map[string]string{"verb": "PUT"}},
	{label: "consul queue wait", series: "workqueue_queue_duration_seconds", want: map[string]string{"name": "consul"}},
	{label: "consul sync", series: "consul_gateway_controller_sync_duration_seconds", want: map[string]string{"queue": "consul"}},
	{label: "translate", series: "consul_gateway_controller_translate_duration_seconds"},
	{label: "Consul request", series: "consul_gateway_controller_consul_request_duration_seconds", byLabel: "operation"},
}

// stagesOf is the mean of each edit stage between two scrapes; stages the controller
// does not expose are left out.
func stagesOf(before, after scrape) []stage {
	var out []stage
	for _, st := range editStages {
		if st.byLabel == "" {
			if d := deltaHistogram(before, after, st.series, st.want); d.ok {
				out = append(out, stage{label: st.label, delta: d})
			}
			continue
		}
		for _, v := range after.labelValues(st.series+"_count", st.byLabel) {
			// A label value the edits never used (create, delete) is not a stage of them.
			if d := deltaHistogram(before, after, st.series, map[string]string{st.byLabel: v}); d.count > 0 {
				out = append(out, stage{label: fmt.Sprintf("%s (%s=%s)", st.label, st.byLabel, v), delta: d})
			}
		}
	}
	return out
}

// edits changes the path of count routes, one at a time, spread over all routes.
func (s *stack) edits(ctx context.Context, ctl *testenv.Controller, count int) (*editRun, error) {
	ctx, cancel := whileRunning(ctx, s.cfg.timeout, ctl)
	defer cancel()
	before, err := scrapeController(ctx, ctl)
	if err != nil {
		return nil, err
	}
	run := &editRun{}
	if s.cfg.profiles {
		// A CPU profile of the first seconds of the edits: where an edit's time goes.
		profiled := make(chan error, 1)
		go func() { profiled <- saveProfile(ctx, ctl, "profile?seconds=10", "edits-cpu") }()
		defer func() {
			if err := <-profiled; err != nil {
				logf("%s: %v", s.name, err)
			}
		}()
	}
	stride := max(s.size.routes/count, 1)
	for k := range count {
		i := (k * stride) % s.size.routes
		l, err := s.edit(ctx, i, k)
		if err != nil {
			return nil, fmt.Errorf("edit %d of %s: %w", k, routeName(i), err)
		}
		run.toConsul = append(run.toConsul, l.toConsul.Seconds())
		run.toJudged = append(run.toJudged, l.toJudged.Seconds())
		run.toStatus = append(run.toStatus, l.toStatus.Seconds())
	}
	after, err := scrapeController(ctx, ctl)
	if err != nil {
		return nil, err
	}
	run.stages = stagesOf(before, after)
	logf("%s: %d edits, to Consul p50/p99/max %s", s.name, count, latencySummary(run.toConsul))
	return run, nil
}

// editLatency is one edit's latencies from the API write returning.
type editLatency struct {
	toConsul, toJudged, toStatus time.Duration
}

// edit changes route i's path to edit k's value and waits for the entry in Consul,
// for Consul's verdict on it, and for the route's status final at the new generation,
// so edits never overlap. The status counts as final with Consul's verdict on the new
// entry only once both hold: before Consul judged the new entry, a ConsulAccepted at
// the new generation still carries the verdict on the old one.
func (s *stack) edit(ctx context.Context, i, k int) (editLatency, error) {
	name, path := routeName(i), routePath(i, k)
	_, meta, err := s.consul.ConfigEntries().Get(consulapi.HTTPRoute, entryName(name), (&consulapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return editLatency{}, fmt.Errorf("read the entry before the edit: %w", err)
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"rules": []gatewayv1.HTTPRouteRule{rule(serviceName(i%s.size.gateways), path)}}})
	if err != nil {
		return editLatency{}, err
	}
	route, err := s.gateway.GatewayV1().HTTPRoutes(benchNamespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return editLatency{}, err
	}
	written := time.Now()
	seen, judged, err := s.waitEntryPath(ctx, entryName(name), path, meta.LastIndex)
	if err != nil {
		return editLatency{}, err
	}
	final, err := s.tracker.waitObjectFinal(ctx, routeKey(name), route.Generation)
	if err != nil {
		return editLatency{}, err
	}
	return editLatency{toConsul: seen.Sub(written), toJudged: judged.Sub(written), toStatus: later(final, judged).Sub(written)}, nil
}

// waitEntryPath waits until Consul's http-route entry name matches path, and then
// until Consul's own status on it says Accepted. With -edit-wait=blocking it waits
// with blocking queries from index, which return as soon as the config entries
// change; with poll it reads every 5 ms.
func (s *stack) waitEntryPath(ctx context.Context, name, path string, index uint64) (seen, judged time.Time, err error) {
	for {
		q := (&consulapi.QueryOptions{}).WithContext(ctx)
		if s.cfg.editWait == "blocking" {
			q.WaitIndex, q.WaitTime = index, 10*time.Second
		}
		entry, meta, err := s.consul.ConfigEntries().Get(consulapi.HTTPRoute, name, q)
		if err != nil && !strings.Contains(err.Error(), "404") {
			return seen, judged, fmt.Errorf("read %s: %w", name, err)
		}
		if routeHasPath(entry, path) {
			now := time.Now()
			if seen.IsZero() {
				seen = now
			}
			if entryAccepted(entry) {
				return seen, now, nil
			}
		}
		if meta != nil && meta.LastIndex > index {
			index = meta.LastIndex
		} else if err != nil || s.cfg.editWait != "blocking" {
			select {
			case <-ctx.Done():
				return seen, judged, context.Cause(ctx)
			case <-time.After(5 * time.Millisecond):
			}
		}
		if ctx.Err() != nil {
			return seen, judged, fmt.Errorf("waiting for %s to hold %s, judged: %w", name, path, context.Cause(ctx))
		}
	}
}

// routeHasPath reports whether an http-route entry matches path: the controller
// writes a path prefix as an exact match on it, or as a prefix with a slash appended.
func routeHasPath(e consulapi.ConfigEntry, path string) bool {
	r, ok := e.(*consulapi.HTTPRouteConfigEntry)
	if !ok {
		return false
	}
	for _, rule := range r.Rules {
		for _, m := range rule.Matches {
			if strings.TrimSuffix(m.Path.Value, "/") == path {
				return true
			}
		}
	}
	return false
}

// handover is a new process taking over a converged stack: after a restart or a
// failover.
type handover struct {
	exitCode   int           // of the old process (restart only)
	leaderIn   time.Duration // from the signal to the new process holding the Lease
	counters   counters      // the new process's writes, by its own count
	server     serverCounts  // the writes the servers saw from the signal until settled
	flaps      flapStats     // what the watch saw from the signal until settled
	observeFor time.Duration
}

// restart sends SIGTERM to old and starts a new process at once, as a rolling update
// does, and measures until the new one settled.
func (s *stack) restart(ctx context.Context, old *testenv.Controller, qps float64, burst int) (*testenv.Controller, *handover, error) {
	mark, err := s.markHandover(ctx)
	if err != nil {
		return nil, nil, err
	}
	from := time.Now()
	code, err := old.Terminate(30 * time.Second)
	if err != nil {
		return nil, nil, err
	}
	ctl, err := s.startController("restart", qps, burst)
	if err != nil {
		return nil, nil, err
	}
	h, err := s.observeHandover(ctx, ctl, from, mark)
	if err != nil {
		return ctl, nil, err
	}
	h.exitCode = code
	return ctl, h, nil
}

// failover starts a second process, waits until it is ready as a follower, SIGKILLs
// the leader and measures until the follower has taken over and settled.
func (s *stack) failover(ctx context.Context, leader *testenv.Controller, qps float64, burst int) (*testenv.Controller, *handover, error) {
	follower, err := s.startController("failover", qps, burst)
	if err != nil {
		return nil, nil, err
	}
	if err := follower.WaitReady(ctx, s.cfg.timeout); err != nil {
		return follower, nil, err
	}
	mark, err := s.markHandover(ctx)
	if err != nil {
		return follower, nil, err
	}
	from := time.Now()
	if err := leader.Kill(); err != nil {
		return follower, nil, err
	}
	h, err := s.observeHandover(ctx, follower, from, mark)
	return follower, h, err
}

// handoverMark is where the servers' counts stood before a handover.
type handoverMark struct {
	api    apiCounts
	consul consulMark
}

func (s *stack) markHandover(ctx context.Context) (handoverMark, error) {
	api, err := s.apiserverCounts(ctx)
	if err != nil {
		return handoverMark{}, err
	}
	consul, err := s.markConsul(ctx)
	return handoverMark{api: api, consul: consul}, err
}

func (s *stack) observeHandover(ctx context.Context, ctl *testenv.Controller, from time.Time, mark handoverMark) (*handover, error) {
	led, err := s.waitLeader(ctx, ctl)
	if err != nil {
		return nil, err
	}
	m, err := s.settle(ctx, ctl)
	if err != nil {
		return nil, err
	}
	to := time.Now()
	server, err := s.serverCountsSince(ctx, mark.api, mark.consul)
	if err != nil {
		return nil, err
	}
	h := &handover{leaderIn: led.Sub(from), counters: countersOf(m), server: server, flaps: s.tracker.window(from, to), observeFor: to.Sub(from)}
	if d := disagreement(h.counters, h.server); d != "" {
		logf("%s: %s: the controller's counts and the servers' disagree: %s", s.name, ctl.Name(), d)
	}
	return h, nil
}

// idleRun is a controller with no routes: the memory baseline.
type idleRun struct {
	peakRSS int64
	cpu     float64
}

// idle runs a controller on an empty cluster (one GatewayClass) until it accepted the
// class and settled.
func (s *stack) idle(ctx context.Context) (*idleRun, error) {
	ctl, err := s.startController("idle", defaultQPS, defaultBurst)
	if err != nil {
		return nil, err
	}
	wctx, cancel := whileRunning(ctx, s.cfg.timeout, ctl)
	defer cancel()
	for {
		class, err := s.gateway.GatewayV1().GatewayClasses().Get(wctx, className, metav1.GetOptions{})
		if err == nil && meta.IsStatusConditionTrue(class.Status.Conditions, string(gatewayv1.GatewayClassConditionStatusAccepted)) {
			break
		}
		select {
		case <-wctx.Done():
			return nil, errors.Join(errors.New("waiting for the GatewayClass to be accepted"), context.Cause(wctx))
		case <-time.After(100 * time.Millisecond):
		}
	}
	m, err := s.settle(ctx, ctl)
	if err != nil {
		return nil, err
	}
	mem, err := ctl.Memory()
	if err != nil {
		return nil, err
	}
	return &idleRun{peakRSS: mem.PeakRSS, cpu: countersOf(m).cpu}, nil
}
