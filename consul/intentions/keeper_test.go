package intentions

import (
	"context"
	"errors"
	"net/http"
	gosync "sync"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	dto "github.com/prometheus/client_model/go"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/metrics"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// Consul loses its data while the syncer's watch of each route kind is away, as it is
// when Consul stops (it tells the keeper so: ForgetRoutes). Until the syncer lists the
// routes of the new Consul, the keeper writes nothing: the routes it knew may be gone
// with the old one (test/chaos, seed 202: a gateway moved to another class during the
// outage had its intentions put back in the new Consul). Once they are listed, each
// destination they need is written once, and a quiet keeper then writes nothing.
func TestKeeperWaitsForTheRoutesOfAConsulThatLostItsData(t *testing.T) {
	kt := newKeeperTest(t, true)
	kt.observe(httpRoute("web", "edge", "echo"))
	kt.waitUntil("the needs of route web are known", kt.needed("echo", "edge"))
	kt.drain()
	kt.expectSource("echo", "edge")

	if err := kt.agent.Stop(); err != nil {
		t.Fatal(err)
	}
	kt.k.ForgetRoutes(consulapi.HTTPRoute)
	kt.k.ForgetRoutes(consulapi.TCPRoute)
	if err := kt.agent.Start(); err != nil { // a dev agent comes back empty
		t.Fatal(err)
	}
	kt.expectNothingWrittenOnceListed("probe", "before the syncer lists the routes again")

	// The syncer lists the new Consul: route web is gone, route web-v2 sends to echo-v2.
	writes := kt.writes()
	kt.observe(httpRoute("web-v2", "edge", "echo-v2"))
	kt.waitUntil("the needs of route web-v2 are known", kt.needed("echo-v2", "edge"))
	kt.drain()
	kt.expectSource("echo-v2", "edge")
	kt.expectNoEntry("echo")
	if got := kt.writes() - writes; got != 1 {
		t.Errorf("the keeper wrote %v times once the routes were listed; want 1 (echo-v2 created)", got)
	}
	kt.expectQuiet("echo-v2")
}

// When the syncer lists again, after a data loss, the routes Consul lost (it writes
// them again), the keeper reads every destination they need and puts back what Consul
// lost at once, writing each once: it does not wait for its own watch to list the
// Consul that answers now (test/chaos, seed 202: the replicas stopped, converged,
// before the keeper had put back intentions, and the referee wrote them).
func TestKeeperPutsBackWhatConsulLostOnceTheRoutesAreListedAgain(t *testing.T) {
	kt := newKeeperTest(t, false) // the test lists for the keeper's watches
	kt.listForWatches()
	kt.observe(httpRoute("web", "edge", "echo"))
	kt.waitUntil("the needs of route web are known", kt.needed("echo", "edge"))
	kt.drain()
	kt.expectSource("echo", "edge")

	if err := kt.agent.Stop(); err != nil {
		t.Fatal(err)
	}
	kt.k.ForgetRoutes(consulapi.HTTPRoute)
	kt.k.ForgetRoutes(consulapi.TCPRoute)
	if err := kt.agent.Start(); err != nil {
		t.Fatal(err)
	}
	// The syncer, which writes route web again, lists it before the keeper's own
	// watches list the new Consul.
	writes := kt.writes()
	kt.observe(httpRoute("web", "edge", "echo"))
	kt.waitUntil("the needs of route web are known again", kt.needed("echo", "edge"))
	kt.drain()
	kt.expectSource("echo", "edge")
	if got := kt.writes() - writes; got != 1 {
		t.Errorf("the keeper wrote %v times once the routes were listed again; want 1 (echo created)", got)
	}
	// Its watches list the new Consul: nothing more to write.
	kt.listForWatches()
	kt.drain()
	if got := kt.writes() - writes; got != 1 {
		t.Errorf("the keeper wrote %v times once its watches listed the new Consul; want 1", got)
	}
}

// keeperTest runs a keeper against a Consul dev agent of the test's own: its watches,
// or only its computation when the test lists for the watches (listForWatches). The
// test drains the keeper's queue itself (drain), so what it checks after a drain is
// all the keeper did.
type keeperTest struct {
	t      *testing.T
	ctx    context.Context
	agent  *testenv.ConsulAgent
	consul *consulapi.Client
	k      *Keeper
	marker string
}

var keeperOwnership = translate.Ownership{Controller: "example.com/gateway", ClusterID: "keeper-test"}

func newKeeperTest(t *testing.T, watch bool) *keeperTest {
	t.Helper()
	agent, admin := testenv.StartConsulFor(t, t.TempDir(), testenv.ConsulOptions{})
	k := NewKeeper(Config{Client: admin, Ownership: keeperOwnership})
	ctx, cancel := context.WithCancel(t.Context())
	var wg gosync.WaitGroup
	if watch {
		k.watchAll(ctx, &wg)
	} else {
		wg.Go(func() { k.computeLoop(ctx) })
	}
	t.Cleanup(func() {
		cancel()
		k.queue.ShutDown()
		wg.Wait()
	})
	return &keeperTest{t: t, ctx: ctx, agent: agent, consul: admin, k: k, marker: Marker(keeperOwnership)}
}

// listForWatches plays the keeper's watches: it lists service-intentions and the
// chain kinds, consistently, and tells the keeper.
func (kt *keeperTest) listForWatches() {
	kt.t.Helper()
	for _, kind := range append([]string{consulapi.ServiceIntentions}, chainKinds...) {
		entries, _, err := kt.consul.ConfigEntries().List(kind, &consulapi.QueryOptions{RequireConsistent: true})
		if err != nil {
			kt.t.Fatal(err)
		}
		if kind == consulapi.ServiceIntentions {
			kt.k.observeIntentions(kt.ctx, entries)
		} else {
			kt.k.observeChains(kind, entries)
		}
	}
}

// observe plays the syncer listing both route kinds: routes are every route of ours.
func (kt *keeperTest) observe(routes ...consulapi.ConfigEntry) {
	kt.k.ObserveRoutes(consulapi.HTTPRoute, routes)
	kt.k.ObserveRoutes(consulapi.TCPRoute, nil)
}

func httpRoute(name, gateway, service string) consulapi.ConfigEntry {
	return &consulapi.HTTPRouteConfigEntry{
		Kind: consulapi.HTTPRoute, Name: name,
		Parents: []consulapi.ResourceReference{{Kind: consulapi.APIGateway, Name: gateway}},
		Rules:   []consulapi.HTTPRouteRule{{Services: []consulapi.HTTPService{{Name: service}}}},
	}
}

// waitUntil waits until cond holds of the keeper's state. The keeper queues what a
// change of its state asks for in the same critical section, so once cond holds, the
// destinations it queued for it are in the queue.
func (kt *keeperTest) waitUntil(what string, cond func() bool) {
	kt.t.Helper()
	testenv.Eventually(kt.t, 60*time.Second, what, func(context.Context) error {
		kt.k.mu.Lock()
		defer kt.k.mu.Unlock()
		if !cond() {
			return errors.New("not yet")
		}
		return nil
	})
}

// needed reports whether the needs are known and have gateway reach destination.
// Called with the keeper's mu held.
func (kt *keeperTest) needed(destination, gateway string) func() bool {
	return func() bool {
		return kt.k.needs != nil && kt.k.needs[NewService(destination, "", "")][NewService(gateway, "", "")]
	}
}

// listedEntry reports whether the keeper's last list holds destination's entry.
// Called with the keeper's mu held.
func (kt *keeperTest) listedEntry(destination string) func() bool {
	return func() bool { return kt.k.listed[NewService(destination, "", "")] != nil }
}

// drain syncs every queued destination, as a worker would.
func (kt *keeperTest) drain() {
	kt.t.Helper()
	for kt.k.queue.Len() > 0 {
		d, shutdown := kt.k.queue.Get()
		if shutdown {
			return
		}
		err := kt.k.sync(kt.ctx, d)
		kt.k.queue.Done(d)
		kt.k.queue.Forget(d)
		if err != nil {
			kt.t.Fatalf("sync %s: %v", d, err)
		}
	}
}

// expectNothingWrittenOnceListed writes a foreign entry for probe and waits until the
// keeper has listed it: then, with its queue drained, it must have written nothing.
func (kt *keeperTest) expectNothingWrittenOnceListed(probe, when string) {
	kt.t.Helper()
	writes := kt.writes()
	kt.putForeign(probe, "team-probe")
	kt.waitUntil("the keeper listed entry "+probe, kt.listedEntry(probe))
	kt.drain()
	if got := kt.writes() - writes; got != 0 {
		kt.t.Errorf("%s the keeper wrote %v times; want none", when, got)
	}
	kt.expectNoEntry("echo")
}

// expectQuiet checks that a keeper that has done its work writes nothing more when
// Consul answers again (a foreign entry is written): no write counted, and
// destination's entry keeps its ModifyIndex.
func (kt *keeperTest) expectQuiet(destination string) {
	kt.t.Helper()
	before := kt.entry(destination)
	writes := kt.writes()
	kt.putForeign("quiet-probe", "team-quiet")
	kt.waitUntil("the keeper listed entry quiet-probe", kt.listedEntry("quiet-probe"))
	kt.drain()
	if got := kt.writes() - writes; got != 0 {
		kt.t.Errorf("a quiet keeper wrote %v times; want none", got)
	}
	if after := kt.entry(destination); after == nil || after.ModifyIndex != before.ModifyIndex {
		kt.t.Errorf("the entry of %s changed while the keeper was quiet: %+v, was %+v", destination, after, before)
	}
}

// putForeign writes destination's entry with one source of another writer.
func (kt *keeperTest) putForeign(destination, source string) {
	kt.t.Helper()
	entry := &consulapi.ServiceIntentionsConfigEntry{Kind: consulapi.ServiceIntentions, Name: destination, Sources: []*consulapi.SourceIntention{
		{Name: source, Action: consulapi.IntentionActionDeny, Type: consulapi.IntentionSourceConsul, Description: "another team"},
	}}
	if _, _, err := kt.consul.ConfigEntries().Set(entry, nil); err != nil {
		kt.t.Fatal(err)
	}
}

func (kt *keeperTest) entry(destination string) *consulapi.ServiceIntentionsConfigEntry {
	kt.t.Helper()
	entry, _, err := kt.consul.ConfigEntries().Get(consulapi.ServiceIntentions, destination, nil)
	var status consulapi.StatusError
	if errors.As(err, &status) && status.Code == http.StatusNotFound {
		return nil
	}
	if err != nil {
		kt.t.Fatal(err)
	}
	return entry.(*consulapi.ServiceIntentionsConfigEntry)
}

func (kt *keeperTest) expectSource(destination, gateway string) {
	kt.t.Helper()
	entry := kt.entry(destination)
	if entry == nil {
		kt.t.Fatalf("Consul has no service-intentions entry for %s; want one letting %s through", destination, gateway)
	}
	for _, src := range entry.Sources {
		if src.Name == gateway && src.Description == kt.marker && src.Action == consulapi.IntentionActionAllow {
			return
		}
	}
	kt.t.Fatalf("the service-intentions of %s do not let %s through: %+v", destination, gateway, entry.Sources)
}

func (kt *keeperTest) expectNoEntry(destination string) {
	kt.t.Helper()
	if entry := kt.entry(destination); entry != nil {
		kt.t.Errorf("Consul holds service-intentions for %s, which no route it holds sends to: %+v", destination, entry.Sources)
	}
}

// writes is how many service-intentions writes the keepers of this process counted,
// whatever their result.
func (kt *keeperTest) writes() float64 {
	kt.t.Helper()
	var sum float64
	for _, op := range []string{"create", "update", "delete"} {
		for _, result := range []string{metrics.ResultOK, metrics.ResultConflict, metrics.ResultError} {
			var m dto.Metric
			if err := metrics.ConsulWrites.WithLabelValues(consulapi.ServiceIntentions, op, result).Write(&m); err != nil {
				kt.t.Fatal(err)
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// A list of routes that asks for nothing new does not compute the needs again: at a
// cold start, Consul's index moves with every entry written and brings each route
// kind's list again, mostly unchanged. The first list of a kind, and a changed one, do.
func TestObserveRoutesComputesOnlyWhatChanged(t *testing.T) {
	k := NewKeeper(Config{Ownership: keeperOwnership})
	woken := func() bool {
		select {
		case <-k.wake:
			return true
		default:
			return false
		}
	}
	steps := []struct {
		what   string
		kind   string
		routes []consulapi.ConfigEntry
		wakes  bool
	}{
		{"the first list of http-routes", consulapi.HTTPRoute, []consulapi.ConfigEntry{httpRoute("a", "gw", "web")}, true},
		{"the first list of tcp-routes, empty", consulapi.TCPRoute, nil, true},
		{"the same http-routes, decoded again", consulapi.HTTPRoute, []consulapi.ConfigEntry{httpRoute("a", "gw", "web")}, false},
		{"no tcp-routes again", consulapi.TCPRoute, nil, false},
		{"a route sends to another service", consulapi.HTTPRoute, []consulapi.ConfigEntry{httpRoute("a", "gw", "api")}, true},
		{"a second route", consulapi.HTTPRoute, []consulapi.ConfigEntry{httpRoute("a", "gw", "api"), httpRoute("b", "gw", "api")}, true},
		{"the route is gone", consulapi.HTTPRoute, []consulapi.ConfigEntry{httpRoute("b", "gw", "api")}, true},
	}
	for _, step := range steps {
		k.ObserveRoutes(step.kind, step.routes)
		if got := woken(); got != step.wakes {
			t.Errorf("%s: the needs computed again %v, want %v", step.what, got, step.wakes)
		}
	}
}
