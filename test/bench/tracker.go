package main

import (
	"context"
	"fmt"
	gosync "sync"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"
)

// consulAcceptedCondition is the route condition that carries Consul's verdict.
const consulAcceptedCondition = "consul-gateway-controller.github.io/ConsulAccepted"

// routeFinal reports whether the route's status is what a converged controller leaves:
// for the parent of ours, Accepted, ResolvedRefs and ConsulAccepted are True and
// observed at the route's generation.
func routeFinal(r *gatewayv1.HTTPRoute, controller gatewayv1.GatewayController) bool {
	for _, p := range r.Status.Parents {
		if p.ControllerName == controller {
			return conditionsTrue(p.Conditions, r.Generation,
				string(gatewayv1.RouteConditionAccepted), string(gatewayv1.RouteConditionResolvedRefs), consulAcceptedCondition)
		}
	}
	return false
}

// gatewayFinal reports whether the Gateway is Accepted and Programmed at its generation.
func gatewayFinal(g *gatewayv1.Gateway) bool {
	return conditionsTrue(g.Status.Conditions, g.Generation,
		string(gatewayv1.GatewayConditionAccepted), string(gatewayv1.GatewayConditionProgrammed))
}

func conditionsTrue(conds []metav1.Condition, generation int64, types ...string) bool {
	for _, t := range types {
		c := meta.FindStatusCondition(conds, t)
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != generation {
			return false
		}
	}
	return true
}

// transition is when an object's status became final or stopped being final.
type transition struct {
	at    time.Time
	final bool
}

// notFinalWithin is how long an object was not final within [from, to], given its
// transitions in time order. Before its first transition it counts as not final (it
// did not exist yet, or had no status).
func notFinalWithin(history []transition, from, to time.Time) time.Duration {
	final := false
	i := 0
	for ; i < len(history) && !history[i].at.After(from); i++ {
		final = history[i].final
	}
	var total time.Duration
	since := from
	for ; i < len(history) && history[i].at.Before(to); i++ {
		if !final {
			total += history[i].at.Sub(since)
		}
		final, since = history[i].final, history[i].at
	}
	if !final {
		total += to.Sub(since)
	}
	return total
}

// flapStats sums what the objects' statuses did within a window.
type flapStats struct {
	statusUpdates int           // status changes the watch delivered
	objects       int           // objects with any time not final
	sum           time.Duration // not-final time summed over objects
	max           time.Duration // the longest not-final time of one object
}

// windowStats is flapStats over [from, to] for the given histories and status
// change times.
func windowStats(histories map[string][]transition, changes []time.Time, from, to time.Time) flapStats {
	var s flapStats
	for _, h := range histories {
		d := notFinalWithin(h, from, to)
		if d > 0 {
			s.objects++
			s.sum += d
			s.max = max(s.max, d)
		}
	}
	for _, at := range changes {
		if !at.Before(from) && !at.After(to) {
			s.statusUpdates++
		}
	}
	return s
}

// objectState is what the tracker knows of one route or Gateway.
type objectState struct {
	final      bool
	generation int64
	history    []transition
}

// tracker records, from a watch (not by sampling), every status change of the
// benchmark's routes and Gateways and when each became or stopped being final.
type tracker struct {
	controller gatewayv1.GatewayController
	expected   int

	mu        gosync.Mutex
	objects   map[string]*objectState
	changes   []time.Time // every status change, in delivery order
	nonFinal  int
	lastFinal time.Time // when nonFinal last dropped to 0 with every object seen
	notify    chan struct{}
}

func routeKey(name string) string   { return "HTTPRoute/" + name }
func gatewayKey(name string) string { return "Gateway/" + name }

// startTracker watches HTTPRoutes and Gateways in namespace and returns once the
// watch has listed them. expected is how many objects the tracker must have seen
// before "all final" can hold.
func startTracker(ctx context.Context, client gatewayclient.Interface, namespace string,
	controller gatewayv1.GatewayController, expected int) (*tracker, error) {
	t := &tracker{controller: controller, expected: expected, objects: map[string]*objectState{}, notify: make(chan struct{})}
	factory := gatewayinformers.NewSharedInformerFactoryWithOptions(client, 0, gatewayinformers.WithNamespace(namespace))
	routes := factory.Gateway().V1().HTTPRoutes().Informer()
	gateways := factory.Gateway().V1().Gateways().Informer()
	if _, err := routes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { t.observeRoute(nil, obj) },
		UpdateFunc: func(old, obj any) {
			t.observeRoute(old, obj)
		},
	}); err != nil {
		return nil, err
	}
	if _, err := gateways.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.observeGateway(nil, obj) },
		UpdateFunc: func(old, obj any) { t.observeGateway(old, obj) },
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("tracker: %v never synced", typ)
		}
	}
	return t, nil
}

func (t *tracker) observeRoute(old, obj any) {
	r, ok := obj.(*gatewayv1.HTTPRoute)
	if !ok {
		return
	}
	changed := false
	if o, ok := old.(*gatewayv1.HTTPRoute); ok {
		changed = !apiequality.Semantic.DeepEqual(o.Status, r.Status)
	}
	t.observe(routeKey(r.Name), r.Generation, routeFinal(r, t.controller), changed)
}

func (t *tracker) observeGateway(old, obj any) {
	g, ok := obj.(*gatewayv1.Gateway)
	if !ok {
		return
	}
	changed := false
	if o, ok := old.(*gatewayv1.Gateway); ok {
		changed = !apiequality.Semantic.DeepEqual(o.Status, g.Status)
	}
	t.observe(gatewayKey(g.Name), g.Generation, gatewayFinal(g), changed)
}

// observe records one delivered object. Times are taken on delivery, which trails
// the API server's write by the watch's latency.
func (t *tracker) observe(key string, generation int64, final, statusChanged bool) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	s, seen := t.objects[key]
	if !seen {
		s = &objectState{}
		t.objects[key] = s
		if !final {
			t.nonFinal++
		}
	} else if s.final != final {
		if final {
			t.nonFinal--
		} else {
			t.nonFinal++
		}
	}
	if !seen || s.final != final {
		s.history = append(s.history, transition{at: now, final: final})
	}
	s.final, s.generation = final, generation
	if statusChanged {
		t.changes = append(t.changes, now)
	}
	if t.nonFinal == 0 && len(t.objects) >= t.expected {
		t.lastFinal = now
	}
	close(t.notify)
	t.notify = make(chan struct{})
}

// allFinal reports whether every expected object is final.
func (t *tracker) allFinal() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nonFinal == 0 && len(t.objects) >= t.expected
}

// lastChange is when the watch last delivered a status change (zero if never).
func (t *tracker) lastChange() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.changes) == 0 {
		return time.Time{}
	}
	return t.changes[len(t.changes)-1]
}

// waitFor blocks until cond (called with the lock held) holds or ctx ends.
func (t *tracker) waitFor(ctx context.Context, what string, cond func() bool) error {
	for {
		t.mu.Lock()
		ok, notify := cond(), t.notify
		t.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting until %s: %w (%s)", what, context.Cause(ctx), t.summary())
		case <-notify:
		}
	}
}

// waitAllFinal waits until every expected object is final and returns when the last
// one became so.
func (t *tracker) waitAllFinal(ctx context.Context) (time.Time, error) {
	err := t.waitFor(ctx, "every route and Gateway is final", func() bool {
		return t.nonFinal == 0 && len(t.objects) >= t.expected
	})
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lastFinal, err
}

// waitObjectFinal waits until the object is final at generation or later, and returns
// when the watch delivered that.
func (t *tracker) waitObjectFinal(ctx context.Context, key string, generation int64) (time.Time, error) {
	var at time.Time
	err := t.waitFor(ctx, key+" is final", func() bool {
		s := t.objects[key]
		if s == nil || !s.final || s.generation < generation {
			return false
		}
		at = s.history[len(s.history)-1].at
		return true
	})
	return at, err
}

// window is flapStats over [from, to].
func (t *tracker) window(from, to time.Time) flapStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	histories := make(map[string][]transition, len(t.objects))
	for k, s := range t.objects {
		histories[k] = s.history
	}
	return windowStats(histories, t.changes, from, to)
}

// summary says how far the objects are, for timeout errors.
func (t *tracker) summary() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var example string
	for k, s := range t.objects {
		if !s.final {
			example = k
			break
		}
	}
	return fmt.Sprintf("%d of %d objects seen, %d not final, e.g. %s", len(t.objects), t.expected, t.nonFinal, example)
}
