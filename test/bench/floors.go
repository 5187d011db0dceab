package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// The floors: the writes a cold start needs, sized from the targets (not from what the
// controller happened to write, so a redundant write shows in the ratio), made by a
// plain client on objects and entries the controller never sees (it is stopped, and
// they are of another namespace, controller and name prefix). The time they take is
// the least any controller making those writes could take.
//
//   - (a) status: 2×routes + 2×Gateways UpdateStatus calls at the controller's QPS;
//   - (b) Consul writes: one check-and-set create per desired entry, on as many
//     workers as the controller's;
//   - (c) Consul judging: the same writes, until Consul's own status on every entry
//     says Accepted: what Consul 1.15 itself needs to take in a cold start.

const (
	floorController = gatewayv1.GatewayController("bench.example.com/floor")
	floorEntry      = "bench-floor-"
)

// floorResult is how long the writes took and the CPU the bench process used meanwhile.
type floorResult struct {
	writes  int
	elapsed time.Duration
	cpu     float64
}

// cpu is the bench process's CPU for floors (a) and (c) ((b) is part of (c)).
func (f *floors) cpu() float64 { return f.status.cpu + f.judged.cpu }

// floors are the baselines of one cold start.
type floors struct {
	status floorResult // (a)
	consul floorResult // (b)
	judged floorResult // (c): from the first write until Consul judged every entry
}

// runFloors runs floors (a), (b) and (c) for run's layout; with edits > 0 it also
// times that many edits made directly (see editFloor). The controllers must be
// stopped, and the stack converged: (b) and (c) copy the controller's entries.
func (s *stack) runFloors(ctx context.Context, run *coldRun, edits int) (*editFloor, error) {
	statusWrites := 2*s.size.routes + 2*s.size.gateways
	routes := max(1, min(statusWrites, s.size.routes))
	if err := s.createFloorRoutes(ctx, routes); err != nil {
		return nil, err
	}
	client, err := s.throttledClient(run.qps, run.burst)
	if err != nil {
		return nil, err
	}
	run.floors = &floors{}
	if run.floors.status, err = s.statusFloor(ctx, client, statusWrites, routes); err != nil {
		return nil, err
	}
	entries, err := s.floorEntries(ctx)
	if err != nil {
		return nil, err
	}
	// The controller's cold start began with an empty Consul: so do the floors.
	if err := s.clearControllerEntries(ctx); err != nil {
		return nil, err
	}
	if run.floors.consul, run.floors.judged, err = s.consulFloors(ctx, entries); err != nil {
		return nil, err
	}
	logf("%s: floors: %d status writes in %s, %d Consul writes in %s, judged in %s", s.name,
		run.floors.status.writes, seconds(run.floors.status.elapsed), run.floors.consul.writes,
		seconds(run.floors.consul.elapsed), seconds(run.floors.judged.elapsed))
	var edit *editFloor
	if edits > 0 {
		if edit, err = s.editFloor(ctx, edits); err != nil {
			return nil, err
		}
	}
	return edit, s.deleteFloor(ctx, entries)
}

// throttledClient is a plain client-go client with the controller's QPS and burst.
func (s *stack) throttledClient(qps float64, burst int) (gatewayclient.Interface, error) {
	cfg := rest.CopyConfig(s.env.Kube.Config(testenv.AdminUser))
	cfg.QPS, cfg.Burst = float32(qps), burst
	return gatewayclient.NewForConfig(cfg)
}

func (s *stack) createFloorRoutes(ctx context.Context, n int) error {
	_, err := s.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: floorNamespace}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	return parallel(ctx, createWorkers, n, func(ctx context.Context, i int) error {
		r := s.route(i)
		r.Namespace = floorNamespace
		r.Spec.ParentRefs[0].Name = "floor-gw"
		_, err := s.gateway.GatewayV1().HTTPRoutes(floorNamespace).Create(ctx, r, metav1.CreateOptions{})
		return err
	})
}

// floorStatus is a route status as large as the controller's (one parent, three
// conditions) that differs for every write, so each write is a real one.
func floorStatus(write int, generation int64) gatewayv1.HTTPRouteStatus {
	now := metav1.Now()
	cond := func(t string) metav1.Condition {
		return metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: "Floor", ObservedGeneration: generation,
			LastTransitionTime: now, Message: fmt.Sprintf("floor write %d", write)}
	}
	section := gatewayv1.SectionName("http")
	return gatewayv1.HTTPRouteStatus{RouteStatus: gatewayv1.RouteStatus{Parents: []gatewayv1.RouteParentStatus{{
		ParentRef:      gatewayv1.ParentReference{Name: "floor-gw", SectionName: &section},
		ControllerName: floorController,
		Conditions: []metav1.Condition{
			cond(string(gatewayv1.RouteConditionAccepted)), cond(string(gatewayv1.RouteConditionResolvedRefs)), cond("bench.example.com/Floor"),
		},
	}}}}
}

// statusFloor makes writes UpdateStatus calls on the floor routes with routeWorkers
// goroutines; each route belongs to one goroutine, so no write conflicts.
func (s *stack) statusFloor(ctx context.Context, client gatewayclient.Interface, writes, routes int) (floorResult, error) {
	res := floorResult{writes: writes}
	// The routes are read before the clock starts: the controller reads from its
	// cache, so the floor makes no reads either.
	list, err := s.gateway.GatewayV1().HTTPRoutes(floorNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return res, err
	}
	initial := map[string]*gatewayv1.HTTPRoute{}
	for i := range list.Items {
		initial[list.Items[i].Name] = &list.Items[i]
	}
	cpu0 := selfCPU()
	start := time.Now()
	err = parallel(ctx, routeWorkers, routeWorkers, func(ctx context.Context, w int) error {
		latest := map[int]*gatewayv1.HTTPRoute{}
		// Writes go round the routes; route r belongs to worker r mod routeWorkers,
		// so two workers never write the same route.
		for j := range writes {
			r := j % routes
			if r%routeWorkers != w {
				continue
			}
			obj, ok := latest[r]
			if !ok {
				if obj, ok = initial[routeName(r)]; !ok {
					return fmt.Errorf("floor route %s is missing", routeName(r))
				}
			}
			obj = obj.DeepCopy()
			obj.Status = floorStatus(j, obj.Generation)
			updated, err := client.GatewayV1().HTTPRoutes(floorNamespace).UpdateStatus(ctx, obj, metav1.UpdateOptions{})
			if err != nil {
				return fmt.Errorf("floor status write %d: %w", j, err)
			}
			latest[r] = updated
		}
		return nil
	})
	res.elapsed, res.cpu = time.Since(start), selfCPU()-cpu0
	return res, err
}

// floorEntries are the controller's entries of the kinds Consul judges, each renamed
// with the floor's prefix (and its references to other entries with it), without
// ownership, status or indexes: the same content for Consul to take in, under names
// nothing else writes. Gateways come first, as a controller would write them.
func (s *stack) floorEntries(ctx context.Context) ([]consulapi.ConfigEntry, error) {
	var out []consulapi.ConfigEntry
	for _, kind := range []string{consulapi.APIGateway, consulapi.HTTPRoute} {
		entries, _, err := s.consul.ConfigEntries().List(kind, (&consulapi.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return nil, fmt.Errorf("list %s entries: %w", kind, err)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.GetName(), floorEntry) {
				continue
			}
			if c := floorCopy(e); c != nil {
				out = append(out, c)
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("the controller left no entries to copy for the Consul floors")
	}
	return out, nil
}

// clearControllerEntries deletes every api-gateway and http-route entry that is not the
// floor's, waits until Consul lists none, and then a few seconds more for Consul's
// gateway controller to take in the deletions, so none of that work overlaps the
// floors.
func (s *stack) clearControllerEntries(ctx context.Context) error {
	for _, kind := range []string{consulapi.HTTPRoute, consulapi.APIGateway} {
		entries, _, err := s.consul.ConfigEntries().List(kind, (&consulapi.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return fmt.Errorf("list %s entries: %w", kind, err)
		}
		err = parallel(ctx, createWorkers, len(entries), func(ctx context.Context, j int) error {
			_, err := s.consul.ConfigEntries().Delete(kind, entries[j].GetName(), (&consulapi.WriteOptions{}).WithContext(ctx))
			return err
		})
		if err != nil {
			return fmt.Errorf("delete the controller's %s entries: %w", kind, err)
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(5 * time.Second):
	}
	return nil
}

// floorCopy is e renamed into the floor's prefix, or nil for a kind it does not copy.
func floorCopy(e consulapi.ConfigEntry) consulapi.ConfigEntry {
	switch e := e.(type) {
	case *consulapi.APIGatewayConfigEntry:
		c := *e
		c.Name, c.Meta, c.Status, c.CreateIndex, c.ModifyIndex = floorEntry+e.Name, nil, consulapi.ConfigEntryStatus{}, 0, 0
		return &c
	case *consulapi.HTTPRouteConfigEntry:
		c := *e
		c.Name, c.Meta, c.Status, c.CreateIndex, c.ModifyIndex = floorEntry+e.Name, nil, consulapi.ConfigEntryStatus{}, 0, 0
		c.Parents = make([]consulapi.ResourceReference, len(e.Parents))
		for i, p := range e.Parents {
			p.Name = floorEntry + p.Name
			c.Parents[i] = p
		}
		return &c
	}
	return nil
}

// consulFloors creates entries with check-and-set (index 0) on consulWorkers
// goroutines: floor (b) ends when the last write returned, floor (c) when Consul's
// own status on every entry says Accepted (read every floorPoll).
func (s *stack) consulFloors(ctx context.Context, entries []consulapi.ConfigEntry) (writes, judged floorResult, err error) {
	writes.writes, judged.writes = len(entries), len(entries)
	cpu0 := selfCPU()
	start := time.Now()
	err = parallel(ctx, consulWorkers, len(entries), func(ctx context.Context, j int) error {
		ok, _, err := s.consul.ConfigEntries().CAS(consul.Compact(entries[j]), 0, (&consulapi.WriteOptions{}).WithContext(ctx))
		if err != nil {
			return fmt.Errorf("floor CAS of %s: %w", entries[j].GetName(), err)
		}
		if !ok {
			return fmt.Errorf("floor CAS of %s lost: the entry existed", entries[j].GetName())
		}
		return nil
	})
	writes.elapsed, writes.cpu = time.Since(start), selfCPU()-cpu0
	if err != nil {
		return writes, judged, err
	}
	for {
		read := time.Now()
		accepted, err := s.floorAccepted(ctx)
		if err != nil {
			return writes, judged, err
		}
		if accepted >= len(entries) {
			judged.elapsed, judged.cpu = time.Since(start), selfCPU()-cpu0
			return writes, judged, nil
		}
		select {
		case <-ctx.Done():
			return writes, judged, fmt.Errorf("waiting for Consul to judge the floor's entries (%d of %d accepted): %w", accepted, len(entries), ctx.Err())
		case <-time.After(floorPause(time.Since(read))):
		}
	}
}

// floorPause is how long floor (c) waits between reads of Consul's verdicts that took
// busy: ten times that, at least 250 ms, as the controller's own watch paces its
// lists. Reading thousands of entries back to back would load Consul while it judges
// and slow the very thing measured.
func floorPause(busy time.Duration) time.Duration {
	return max(10*busy, 250*time.Millisecond)
}

// floorAccepted counts the floor's entries Consul accepted.
func (s *stack) floorAccepted(ctx context.Context) (int, error) {
	n := 0
	for _, kind := range []string{consulapi.APIGateway, consulapi.HTTPRoute} {
		entries, _, err := s.consul.ConfigEntries().List(kind, (&consulapi.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return 0, fmt.Errorf("list %s entries: %w", kind, err)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.GetName(), floorEntry) && entryAccepted(e) {
				n++
			}
		}
	}
	return n, nil
}

// editFloor is the least an edit costs, made directly without a rate limiter: the
// status write alone (what a route's status needs), and a status write followed by a
// check-and-set update (what an entry needs, since the controller writes Consul only
// what the API server confirmed).
type editFloor struct {
	status, toConsul []float64 // seconds
}

// editFloor times edits status writes and edits status-write-then-CAS pairs, on a
// floor route and a floor http-route entry.
func (s *stack) editFloor(ctx context.Context, edits int) (*editFloor, error) {
	client := s.gateway.GatewayV1().HTTPRoutes(floorNamespace)
	route, err := client.Get(ctx, routeName(0), metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	out := &editFloor{}
	for k := range edits {
		start := time.Now()
		route = route.DeepCopy()
		route.Status = floorStatus(-2*k-1, route.Generation)
		if route, err = client.UpdateStatus(ctx, route, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("edit floor status write: %w", err)
		}
		out.status = append(out.status, time.Since(start).Seconds())
	}
	for k := range edits {
		entry := floorRouteEntry(k)
		var index uint64
		if current, _, err := s.consul.ConfigEntries().Get(consulapi.HTTPRoute, entry.Name, (&consulapi.QueryOptions{}).WithContext(ctx)); err == nil {
			index = current.GetModifyIndex()
		}
		start := time.Now()
		route = route.DeepCopy()
		route.Status = floorStatus(-2*k-2, route.Generation)
		if route, err = client.UpdateStatus(ctx, route, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("edit floor status write: %w", err)
		}
		ok, _, err := s.consul.ConfigEntries().CAS(consul.Compact(entry), index, (&consulapi.WriteOptions{}).WithContext(ctx))
		if err != nil || !ok {
			return nil, fmt.Errorf("edit floor CAS: ok=%v: %w", ok, err)
		}
		out.toConsul = append(out.toConsul, time.Since(start).Seconds())
	}
	return out, nil
}

// floorRouteEntry is edit k's version of the edit floor's http-route entry, shaped
// like the controller's (one parent, one rule, one service).
func floorRouteEntry(k int) *consulapi.HTTPRouteConfigEntry {
	return &consulapi.HTTPRouteConfigEntry{
		Kind:    consulapi.HTTPRoute,
		Name:    floorEntry + "edit",
		Parents: []consulapi.ResourceReference{{Kind: consulapi.APIGateway, Name: floorEntry + "gw", SectionName: "http"}},
		Rules: []consulapi.HTTPRouteRule{{
			Matches:  []consulapi.HTTPMatch{{Path: consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchPrefix, Value: fmt.Sprintf("/floor-edit-%d/", k)}}},
			Services: []consulapi.HTTPService{{Name: serviceName(0)}},
		}},
	}
}

// deleteFloor removes the floor's routes and entries, so later scenarios on this stack
// see only the benchmark's objects.
func (s *stack) deleteFloor(ctx context.Context, entries []consulapi.ConfigEntry) error {
	err := s.gateway.GatewayV1().HTTPRoutes(floorNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("delete floor routes: %w", err)
	}
	entries = append(entries, floorRouteEntry(0))
	return parallel(ctx, createWorkers, len(entries), func(ctx context.Context, j int) error {
		_, err := s.consul.ConfigEntries().Delete(entries[j].GetKind(), entries[j].GetName(), (&consulapi.WriteOptions{}).WithContext(ctx))
		return err
	})
}

// selfCPU is the user plus system CPU time of this process so far, in seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
