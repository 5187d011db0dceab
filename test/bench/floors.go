package main

import (
	"context"
	"fmt"
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

// The raw-write floors: the same number of writes the controller made, made directly
// by a plain client, on objects and entries the controller never sees (it is stopped,
// and they are of another namespace, controller and name prefix). The time they take
// is the least any controller making those writes could take.

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

// floors are the baselines of one cold start.
type floors struct {
	status floorResult
	consul floorResult
}

// runFloors makes statusWrites status writes with the controller's QPS and burst and
// consulWrites check-and-set writes with its number of Consul workers; with edits > 0
// it also times that many single status-write-then-CAS pairs (the edit floor). The
// controllers must be stopped.
func (s *stack) runFloors(ctx context.Context, run *coldRun, edits int) ([]float64, error) {
	routes := max(1, min(int(run.counters.statusWrites), s.size.routes))
	entries := max(1, int(run.counters.consulWrites))
	if err := s.createFloorRoutes(ctx, routes); err != nil {
		return nil, err
	}
	client, err := s.throttledClient(run.qps, run.burst)
	if err != nil {
		return nil, err
	}
	run.floors = &floors{}
	if run.floors.status, err = s.statusFloor(ctx, client, int(run.counters.statusWrites), routes); err != nil {
		return nil, err
	}
	if run.floors.consul, err = s.consulFloor(ctx, entries); err != nil {
		return nil, err
	}
	logf("%s: floors: %d status writes in %s, %d Consul writes in %s", s.name,
		run.floors.status.writes, seconds(run.floors.status.elapsed), run.floors.consul.writes, seconds(run.floors.consul.elapsed))
	var latencies []float64
	if edits > 0 {
		if latencies, err = s.editFloor(ctx, edits); err != nil {
			return nil, err
		}
	}
	return latencies, s.deleteFloor(ctx, entries)
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

// floorRouteEntry is an http-route entry of the floor's prefix, shaped like the
// controller's (one parent, one rule, one service).
func floorRouteEntry(j int) *consulapi.HTTPRouteConfigEntry {
	return &consulapi.HTTPRouteConfigEntry{
		Kind:    consulapi.HTTPRoute,
		Name:    fmt.Sprintf("%s%06d", floorEntry, j),
		Parents: []consulapi.ResourceReference{{Kind: consulapi.APIGateway, Name: floorEntry + "gw", SectionName: "http"}},
		Rules: []consulapi.HTTPRouteRule{{
			Matches:  []consulapi.HTTPMatch{{Path: consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchPrefix, Value: fmt.Sprintf("/floor-%d/", j)}}},
			Services: []consulapi.HTTPService{{Name: serviceName(0)}},
		}},
	}
}

// consulFloor creates writes entries with check-and-set (index 0) on consulWorkers
// goroutines.
func (s *stack) consulFloor(ctx context.Context, writes int) (floorResult, error) {
	res := floorResult{writes: writes}
	cpu0 := selfCPU()
	start := time.Now()
	err := parallel(ctx, consulWorkers, writes, func(ctx context.Context, j int) error {
		ok, _, err := s.consul.ConfigEntries().CAS(consul.Compact(floorRouteEntry(j)), 0, (&consulapi.WriteOptions{}).WithContext(ctx))
		if err != nil {
			return fmt.Errorf("floor CAS %d: %w", j, err)
		}
		if !ok {
			return fmt.Errorf("floor CAS %d lost: the entry existed", j)
		}
		return nil
	})
	res.elapsed, res.cpu = time.Since(start), selfCPU()-cpu0
	return res, err
}

// editFloor times edits pairs of one status write and one check-and-set update, made
// directly without a rate limiter: the least an edit costs in API calls.
func (s *stack) editFloor(ctx context.Context, edits int) ([]float64, error) {
	client := s.gateway.GatewayV1().HTTPRoutes(floorNamespace)
	route, err := client.Get(ctx, routeName(0), metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var latencies []float64
	for k := range edits {
		entry := floorRouteEntry(0)
		current, _, err := s.consul.ConfigEntries().Get(consulapi.HTTPRoute, entry.Name, (&consulapi.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return nil, err
		}
		entry.Rules[0].Matches[0].Path.Value = fmt.Sprintf("/floor-edit-%d/", k)
		start := time.Now()
		route = route.DeepCopy()
		route.Status = floorStatus(-k, route.Generation)
		if route, err = client.UpdateStatus(ctx, route, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("edit floor status write: %w", err)
		}
		ok, _, err := s.consul.ConfigEntries().CAS(consul.Compact(entry), current.GetModifyIndex(), (&consulapi.WriteOptions{}).WithContext(ctx))
		if err != nil || !ok {
			return nil, fmt.Errorf("edit floor CAS: ok=%v: %w", ok, err)
		}
		latencies = append(latencies, time.Since(start).Seconds())
	}
	return latencies, nil
}

// deleteFloor removes the floor's routes and entries, so later scenarios on this stack
// see only the benchmark's objects.
func (s *stack) deleteFloor(ctx context.Context, entries int) error {
	err := s.gateway.GatewayV1().HTTPRoutes(floorNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("delete floor routes: %w", err)
	}
	return parallel(ctx, createWorkers, entries, func(ctx context.Context, j int) error {
		_, err := s.consul.ConfigEntries().Delete(consulapi.HTTPRoute, fmt.Sprintf("%s%06d", floorEntry, j), (&consulapi.WriteOptions{}).WithContext(ctx))
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
