package main

import (
	"context"
	"fmt"
	"os"
	"time"
)

// The field's benchmark (gateway-api-bench) compares implementations on the same
// cluster and objects: the time until every route is attached and counted in its
// listener's attachedRoutes, the writes made for it, and memory. Here this controller
// and Envoy Gateway each run alone on a stack of their own holding the same routes,
// Gateways and Services (only the GatewayClass differs), with the same client throttle
// (Envoy Gateway's default, QPS 50, burst 100), held to the same idea of final
// (startAttachTracker), and counted by the kube-apiserver's own metrics.
const (
	peerQPS   = 50
	peerBurst = 100
)

// sideBySide is the comparison at one size.
type sideBySide struct {
	ours, peer *peerRun
	// peerError says why the peer has no figures, when it has none.
	peerError string
}

// runPeer runs this controller and then Envoy Gateway on stacks of cfg.peerSize
// routes. A peer that cannot be built or run is reported in the results, and the
// comparison keeps this controller's column.
func runPeer(ctx context.Context, cfg *config, res *results) error {
	n := cfg.peerSize
	res.side = &sideBySide{}
	err := withStack(ctx, cfg, fmt.Sprintf("n%d-attach", n), newLayout(n, 0), func(s *stack) error {
		var err error
		res.side.ours, err = s.attachRun(ctx)
		return err
	})
	if err != nil {
		return err
	}
	binDir, err := os.MkdirTemp("", "bench-envoy-gateway-bin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(binDir)
	logf("building Envoy Gateway (its own module, %s)", peerModuleDir)
	binary, crdDir, err := buildEnvoyGateway(cfg.root, binDir)
	if err == nil {
		err = withStack(ctx, cfg, fmt.Sprintf("n%d-envoy-gateway", n), newPeerLayout(n), func(s *stack) error {
			var err error
			if res.side.peer, err = s.peerColdStart(ctx, binary, crdDir); err == nil {
				logf("%s: %s", s.name, res.side.peer.text())
			}
			return err
		})
	}
	if err != nil && ctx.Err() == nil {
		// The docs say why the peer has no column; the rest of the run stands.
		res.side.peer, res.side.peerError = nil, err.Error()
		logf("Envoy Gateway was not measured: %v", err)
		return nil
	}
	return err
}

// peerTargets: ahead of Envoy Gateway on the time to attach and on memory.
func (r *results) peerTargets() []target {
	side := r.side
	if side == nil || side.ours == nil || side.peer == nil {
		return nil
	}
	o, p := side.ours, side.peer
	return []target{{
		what:   fmt.Sprintf("%d routes: all attached sooner than Envoy Gateway (%s)", o.size.routes, seconds(p.converge)),
		figure: fmt.Sprintf("%s, %.2f×", seconds(o.converge), o.converge.Seconds()/p.converge.Seconds()), met: o.converge < p.converge,
	}, {
		what:   fmt.Sprintf("%d routes: peak RSS below Envoy Gateway's (%s)", o.size.routes, mib(p.peakRSS)),
		figure: fmt.Sprintf("%s, %.2f×", mib(o.peakRSS), float64(o.peakRSS)/float64(p.peakRSS)), met: o.peakRSS < p.peakRSS,
	}}
}

// attachRun is peerColdStart for this controller: a cold start at the peer's
// throttle, measured until every route is Accepted and counted, then until it
// settled (with Consul's verdicts in every status), then a restart.
func (s *stack) attachRun(ctx context.Context) (*peerRun, error) {
	watchCtx, stop := context.WithCancel(context.Background())
	defer stop()
	attach, err := startAttachTracker(watchCtx, s, controllerName)
	if err != nil {
		return nil, err
	}
	run := &peerRun{size: s.size}
	before, err := s.apiserverCounts(ctx)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	ctl, err := s.startController("attach", peerQPS, peerBurst)
	if err != nil {
		return nil, err
	}
	wctx, cancel := whileRunning(ctx, s.cfg.timeout, ctl)
	defer cancel()
	led, err := s.waitLeader(wctx, ctl)
	if err != nil {
		return nil, err
	}
	run.leaderIn = led.Sub(start)
	finalAt, err := attach.waitAllFinal(wctx)
	if err != nil {
		return nil, err
	}
	run.converge = finalAt.Sub(start)
	logf("%s: all routes attached in %s", s.name, seconds(run.converge))
	if _, err := s.settle(ctx, ctl); err != nil {
		return nil, err
	}
	after, err := s.apiserverCounts(ctx)
	if err != nil {
		return nil, err
	}
	run.cold, run.settled = after.minus(before), time.Since(start)
	mem, err := ctl.Memory()
	if err != nil {
		return nil, err
	}
	run.peakRSS = mem.PeakRSS
	if run.cpu, err = ctl.CPUSeconds(); err != nil {
		return nil, err
	}
	if run.restartExit, err = ctl.Terminate(30 * time.Second); err != nil {
		return nil, err
	}
	if before, err = s.apiserverCounts(ctx); err != nil {
		return nil, err
	}
	restarted := time.Now()
	next, err := s.startController("attach-restart", peerQPS, peerBurst)
	if err != nil {
		return nil, err
	}
	if led, err = s.waitLeader(ctx, next); err != nil {
		return nil, err
	}
	run.restartLeaderIn = led.Sub(restarted)
	if _, err := s.settle(ctx, next); err != nil {
		return nil, err
	}
	if after, err = s.apiserverCounts(ctx); err != nil {
		return nil, err
	}
	run.restart, run.restartSettled = after.minus(before), time.Since(restarted)
	_, err = next.Terminate(30 * time.Second)
	return run, err
}

// sideRows are the comparison's rows: each figure for this controller, with Envoy
// Gateway's as the baseline.
func (r *results) sideRows() []row {
	side := r.side
	if side == nil || side.ours == nil {
		return nil
	}
	o, p := side.ours, side.peer
	n := o.size.routes
	scenario := fmt.Sprintf("side by side with Envoy Gateway v1.9.1, QPS %d/%d", peerQPS, peerBurst)
	rows := []row{}
	add := func(figure, ours, peer string, ratioOf func(*peerRun) float64) {
		rw := row{size: n, scenario: scenario, figure: figure, value: ours}
		switch {
		case p != nil:
			rw.baseline = "Envoy Gateway: " + peer
			if ratioOf != nil {
				rw.ratio = ratio(ratioOf(o), ratioOf(p))
			}
		case side.peerError != "":
			rw.baseline = "Envoy Gateway: not measured (" + side.peerError + ")"
		}
		rows = append(rows, rw)
	}
	peerText := func(f func(*peerRun) string) string {
		if p == nil {
			return ""
		}
		return f(p)
	}
	add("time to all routes Accepted and counted in attachedRoutes", seconds(o.converge), peerText(func(r *peerRun) string { return seconds(r.converge) }),
		func(r *peerRun) float64 { return r.converge.Seconds() })
	add("status writes until settled (API server's count)", fmt.Sprintf("%.0f", o.cold.statusWriteTotal()), peerText(func(r *peerRun) string { return fmt.Sprintf("%.0f", r.cold.statusWriteTotal()) }),
		func(r *peerRun) float64 { return r.cold.statusWriteTotal() })
	add("API requests until settled (API server's count)", fmt.Sprintf("%.0f", o.cold.requestTotal()), peerText(func(r *peerRun) string { return fmt.Sprintf("%.0f", r.cold.requestTotal()) }),
		func(r *peerRun) float64 { return r.cold.requestTotal() })
	add("CPU until settled", fmt.Sprintf("%.1f s", o.cpu), peerText(func(r *peerRun) string { return fmt.Sprintf("%.1f s", r.cpu) }),
		func(r *peerRun) float64 { return r.cpu })
	add("peak RSS (VmHWM)", mib(o.peakRSS), peerText(func(r *peerRun) string { return mib(r.peakRSS) }),
		func(r *peerRun) float64 { return float64(r.peakRSS) })
	add("restart: status writes by the new process", fmt.Sprintf("%.0f", o.restart.statusWriteTotal()), peerText(func(r *peerRun) string { return fmt.Sprintf("%.0f", r.restart.statusWriteTotal()) }), nil)
	add("restart: API requests by the new process", fmt.Sprintf("%.0f", o.restart.requestTotal()), peerText(func(r *peerRun) string { return fmt.Sprintf("%.0f", r.restart.requestTotal()) }), nil)
	return rows
}
