package chaos

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// referee starts a fresh replica, without proxies or faults, once the others are
// gone. Against a converged cluster it must find nothing to do: no status write, no
// Consul or catalog write, no apply or delete of a gateway object. It decides with the same code, so this checks
// that faults left nothing a fault-free run would decide differently.
func (s *scenario) referee(t *testing.T, ctx context.Context) {
	t.Helper()
	// A write the stopped replicas sent after convergence is news; it must have landed
	// before the referee looks, so that the referee sees it. One still on its way would
	// land under the referee, which could then find work that is not its own, or miss
	// some: the referee's verdict would not be about the converged state.
	if left := s.waitForWritesInFlight(ctx, refereeWritesWait); len(left) > 0 {
		s.oracle.violate("convergence: the referee started with writes in flight after waiting %s: %s", refereeWritesWait, strings.Join(left, "; "))
	}
	before := s.storedStatuses(ctx)
	args := slices.Clone(s.replicas[0].args)
	proc, err := env.StartController(testenv.ControllerOptions{Binary: s.replicas[0].binary, Name: "referee-" + s.clusterID, Args: args})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := proc.Terminate(10 * time.Second); err != nil {
			_ = proc.Kill()
		}
	}()
	body, err := s.settled(ctx, proc)
	if err != nil {
		s.oracle.violate("convergence: the referee did not settle: %v", err)
		return
	}
	s.oracle.checked("convergence", 1)
	worked := false
	for _, series := range []string{
		"consul_gateway_controller_status_writes_total",
		"consul_gateway_controller_consul_writes_total",
		"consul_gateway_controller_consul_catalog_writes_total",
		"consul_gateway_controller_gateway_object_applies_total",
		// A leftover gateway object (of a Gateway that left our classes) is work found
		// as much as a missing one.
		"consul_gateway_controller_gateway_object_deletions_total",
	} {
		if n := testenv.MetricSum(body, series); n != 0 {
			worked = true
			s.oracle.violate("convergence: a fresh controller found work after the faults: %s = %v", series, n)
		}
	}
	if worked {
		logChanges(t, proc.LogPath())
		for _, line := range before {
			t.Logf("before the referee: %s", line)
		}
	}
}

// refereeWritesWait bounds how long the referee waits for the stopped replicas' writes
// to land: Consul holds one up to about ten seconds while it has no leader.
const refereeWritesWait = 30 * time.Second

// waitForWritesInFlight waits until no replica has a write in flight, or for at most
// limit; it returns what is still in flight then.
func (s *scenario) waitForWritesInFlight(ctx context.Context, limit time.Duration) []string {
	deadline := time.Now().Add(limit)
	for {
		left := s.writesInFlight()
		if len(left) == 0 || !time.Now().Before(deadline) || ctx.Err() != nil {
			return left
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
}

// storedStatuses describes the conditions of ours on every Gateway and HTTPRoute of
// the scenario, so a referee's change can be read next to what it replaced.
func (s *scenario) storedStatuses(ctx context.Context) []string {
	var out []string
	describe := func(conds []metav1.Condition) string {
		parts := make([]string, 0, len(conds))
		for _, c := range conds {
			parts = append(parts, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason))
		}
		return strings.Join(parts, " ")
	}
	gws, err := s.gw.GatewayV1().Gateways(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{"listing Gateways: " + err.Error()}
	}
	for _, gw := range gws.Items {
		line := fmt.Sprintf("Gateway %s (class %s): %s; addresses %d", gw.Name, gw.Spec.GatewayClassName, describe(gw.Status.Conditions), len(gw.Status.Addresses))
		for _, l := range gw.Status.Listeners {
			line += fmt.Sprintf("; listener %s: %s attachedRoutes=%d", l.Name, describe(l.Conditions), l.AttachedRoutes)
		}
		out = append(out, line)
	}
	hrs, err := s.gw.GatewayV1().HTTPRoutes(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return append(out, "listing HTTPRoutes: "+err.Error())
	}
	for _, r := range hrs.Items {
		for _, p := range r.Status.Parents {
			if string(p.ControllerName) != s.controllerName {
				continue
			}
			out = append(out, fmt.Sprintf("HTTPRoute %s parent %s/%s: %s", r.Name, p.ParentRef.Name, ptrString(p.ParentRef.SectionName), describe(p.Conditions)))
		}
	}
	return out
}

func ptrString[T ~string](p *T) string {
	if p == nil {
		return ""
	}
	return string(*p)
}

// logChanges logs the changes a controller's log reports (its -v=2 lines that write
// something), so a referee violation says what the converged state lacked.
func logChanges(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Logf("reading the referee's log: %v", err)
		return
	}
	changes := []string{"Status updated", "Created", "Updated", "Deleted", "Registered", "Deregistered", "Applied", "Put back", "differs"}
	shown := 0
	for line := range strings.Lines(string(data)) {
		if shown == 60 {
			t.Logf("referee: ... (more in %s)", path)
			return
		}
		if slices.ContainsFunc(changes, func(c string) bool { return strings.Contains(line, c) }) {
			t.Logf("referee: %s", strings.TrimSpace(line))
			shown++
		}
	}
}

// settled waits until the process leads, its queues are empty, and they stay empty for
// a while; it returns the metrics then.
func (s *scenario) settled(ctx context.Context, proc *testenv.Controller) (string, error) {
	deadline := time.Now().Add(2 * time.Minute)
	quiet := 0
	for time.Now().Before(deadline) && ctx.Err() == nil {
		sleepCtx(ctx, time.Second)
		body, err := proc.Metrics(ctx)
		if err != nil || testenv.MetricSum(body, "consul_gateway_controller_leader") != 1 {
			quiet = 0
			continue
		}
		if testenv.MetricSum(body, "workqueue_depth")+testenv.MetricSum(body, "workqueue_unfinished_work_seconds") != 0 {
			quiet = 0
			continue
		}
		if quiet++; quiet >= 8 {
			return body, nil
		}
	}
	return "", fmt.Errorf("not leading with empty queues for 8s within 2m")
}
