package intentions

import (
	"context"
	"maps"
	"slices"
	gosync "sync"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	kworkqueue "k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/workqueue"
)

// routeKinds are the entry kinds whose lists the keeper needs before it removes
// anything: every route of ours is one of them.
var routeKinds = []string{consulapi.HTTPRoute, consulapi.TCPRoute}

// chainKinds are the kinds that make a service's discovery chain reach other services
// than itself: a router's and a splitter's destinations, a resolver's redirect and
// failover.
var chainKinds = []string{consulapi.ServiceRouter, consulapi.ServiceSplitter, consulapi.ServiceResolver}

// Config is what NewKeeper needs.
type Config struct {
	Client    *consulapi.Client
	Ownership translate.Ownership
	// Partition is the admin partition the controller works in; "" on Consul CE.
	Partition string
	// AllNamespaces lists entries of every Consul namespace (Consul Enterprise with
	// namespaces in use).
	AllNamespaces bool
	Workers       int
}

// Keeper keeps the sources of ours in service-intentions entries equal to what the
// route entries in Consul need. It implements consul.RouteObserver. Only the leader
// runs it.
type Keeper struct {
	cfg    Config
	marker string
	queue  kworkqueue.TypedRateLimitingInterface[Service]
	// wake asks the needs to be computed again; it holds at most one signal.
	wake chan struct{}

	mu gosync.Mutex
	// routes holds, per route kind listed at least once, what each owned entry needs.
	routes map[string]map[translate.EntryKey]Route
	// chained holds, per chain kind listed at least once, the services with an entry.
	chained map[string]map[Service]bool
	// chainsChanged is set when a chain kind changed since the targets were read.
	chainsChanged bool
	// targets are the discovery chain targets of routed services that have a chain
	// entry; other services are their own only target.
	targets map[Service][]Service
	// listed are the service-intentions entries, by destination, as last listed; nil
	// before the first list.
	listed map[Service]*consulapi.ServiceIntentionsConfigEntry
	// needs is nil until every list the keeper needs came once, and again after the
	// syncer's watch of a route kind restarted (ForgetRoutes) until it lists the kind
	// again: Consul may have lost its data, and needs computed from the routes it
	// held would put back intentions for routes that are gone.
	needs Needs
	// epoch counts the times needs were forgotten, so that work begun from needs that
	// have since been forgotten is dropped.
	epoch uint64
}

// NewKeeper builds a keeper; nothing talks to Consul until Run.
func NewKeeper(cfg Config) *Keeper {
	return &Keeper{
		cfg:     cfg,
		marker:  Marker(cfg.Ownership),
		queue:   workqueue.New[Service]("intentions"),
		wake:    make(chan struct{}, 1),
		routes:  map[string]map[translate.EntryKey]Route{},
		chained: map[string]map[Service]bool{},
		targets: map[Service][]Service{},
	}
}

// ObserveRoutes implements consul.RouteObserver: owned are every owned entry of kind
// that Consul holds. It only records them; the keeper's own loop does the rest, so the
// syncer's watch never waits for it.
func (k *Keeper) ObserveRoutes(kind string, owned []consulapi.ConfigEntry) {
	routes := make(map[translate.EntryKey]Route, len(owned))
	for _, entry := range owned {
		if r, ok := RouteOf(entry); ok {
			routes[translate.KeyOf(entry)] = r
		}
	}
	k.mu.Lock()
	previous, listed := k.routes[kind]
	if listed && sameRoutes(previous, routes) {
		// Consul's index moves with every config entry written, and each move brings
		// every kind's list again: most answers at a cold start are of routes
		// unchanged, and computing the needs of thousands of routes for each cost the
		// keeper most of its CPU.
		k.mu.Unlock()
		return
	}
	k.routes[kind] = routes
	k.mu.Unlock()
	k.signal()
}

func sameRoutes(a, b map[translate.EntryKey]Route) bool {
	return maps.EqualFunc(a, b, func(x, y Route) bool {
		return slices.Equal(x.Gateways, y.Gateways) && slices.Equal(x.Services, y.Services)
	})
}

// ForgetRoutes implements consul.RouteObserver: the syncer's watch of kind restarts,
// and Consul may have lost the routes it listed. Nothing is written until it lists
// them again.
func (k *Keeper) ForgetRoutes(kind string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.routes, kind)
	k.forgetNeeds()
}

// forgetNeeds makes the needs unknown until every list came again; the computation
// then judges every destination afresh. Callers hold mu.
func (k *Keeper) forgetNeeds() {
	k.needs = nil
	k.epoch++
}

func (k *Keeper) signal() {
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// Run keeps the intentions until ctx is done.
func (k *Keeper) Run(ctx context.Context) error {
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithName("intentions"))
	var wg gosync.WaitGroup
	k.watchAll(ctx, &wg)
	workqueue.Run(ctx, "intentions", k.queue, max(k.cfg.Workers, 1), k.sync)
	wg.Wait()
	return nil
}

// watchAll starts, in wg, the watches and the loop that computes the needs and queues
// what they change; the workers are Run's.
func (k *Keeper) watchAll(ctx context.Context, wg *gosync.WaitGroup) {
	wg.Go(func() { k.watch(ctx, consulapi.ServiceIntentions, k.observeIntentions) })
	for _, kind := range chainKinds {
		wg.Go(func() {
			k.watch(ctx, kind, func(_ context.Context, entries []consulapi.ConfigEntry) { k.observeChains(kind, entries) })
		})
	}
	wg.Go(func() { k.computeLoop(ctx) })
}

// computeLoop computes the needs again each time something they depend on changed, and
// queues the destinations whose needs changed.
func (k *Keeper) computeLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.wake:
			k.compute(ctx)
		}
	}
}

func (k *Keeper) compute(ctx context.Context) {
	logger := klog.FromContext(ctx)
	k.mu.Lock()
	if !k.listedAll() {
		k.mu.Unlock()
		return
	}
	epoch := k.epoch
	routes := k.allRoutes()
	toRead := k.chainsToRead(routes)
	k.chainsChanged = false
	k.mu.Unlock()

	read := map[Service][]Service{}
	failed := false
	for _, s := range toRead {
		targets, err := k.chainTargets(ctx, s)
		if err != nil {
			logger.V(2).Info("Could not read a discovery chain; its service alone is allowed until it can be read", "service", s, "err", err)
			failed = true
			continue
		}
		read[s] = targets
	}
	if failed {
		time.AfterFunc(chainRetry, func() {
			k.mu.Lock()
			k.chainsChanged = true
			k.mu.Unlock()
			k.signal()
		})
	}

	k.mu.Lock()
	defer k.mu.Unlock()
	maps.Copy(k.targets, read)
	if k.epoch != epoch {
		return // a list was forgotten meanwhile: these routes may be gone
	}
	needs := NeedsOf(routes, k.targets)
	if k.needs == nil {
		// Every destination is read and compared, those left by earlier runs
		// included (a source of ours that no route needs is removed), and, after a
		// data loss, those Consul lost, without waiting for the intentions watch to
		// list the Consul that answers now.
		k.needs = needs
		ours := k.ours()
		logger.V(2).Info("Intentions are known; comparing every destination", "destinations", len(ours))
		k.add(ours)
		return
	}
	changed := changedDestinations(k.needs, needs)
	k.needs = needs
	k.add(changed)
}

// add queues destinations. Callers hold mu, so that whoever sees the state that
// queued them also sees them queued.
func (k *Keeper) add(destinations []Service) {
	for _, d := range destinations {
		k.queue.Add(d)
	}
}

// ours lists the destinations that need a source of ours or whose entry, as listed,
// holds one. Callers hold mu, with needs and listed known.
func (k *Keeper) ours() []Service {
	out := slices.Collect(maps.Keys(k.needs))
	for d, entry := range k.listed {
		if _, needed := k.needs[d]; !needed && slices.ContainsFunc(entry.Sources, func(src *consulapi.SourceIntention) bool {
			return src.Description == k.marker
		}) {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, compareServices)
	return out
}

// misjudged lists the destinations whose entry, as listed, is not what their needs
// ask: the ones to write. Callers hold mu, with needs and listed known.
func (k *Keeper) misjudged() []Service {
	var out []Service
	judge := func(d Service) {
		plan := PlanEntry(k.listed[d], d, k.needs[d], k.marker, nil)
		if plan.Entry != nil || plan.Delete {
			out = append(out, d)
		}
	}
	for d := range k.needs {
		judge(d)
	}
	for d := range k.listed {
		if _, needed := k.needs[d]; !needed {
			judge(d)
		}
	}
	slices.SortFunc(out, compareServices)
	return out
}

// listedAll reports whether every list the needs depend on has come. Callers hold mu.
func (k *Keeper) listedAll() bool {
	for _, kind := range routeKinds {
		if _, ok := k.routes[kind]; !ok {
			return false
		}
	}
	for _, kind := range chainKinds {
		if _, ok := k.chained[kind]; !ok {
			return false
		}
	}
	return k.listed != nil
}

// allRoutes lists what every route of ours needs. Callers hold mu.
func (k *Keeper) allRoutes() []Route {
	n := 0
	for _, routes := range k.routes {
		n += len(routes)
	}
	out := make([]Route, 0, n)
	for _, routes := range k.routes {
		for _, r := range routes {
			out = append(out, r)
		}
	}
	return out
}
