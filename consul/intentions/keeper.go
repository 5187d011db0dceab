package intentions

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	gosync "sync"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	kworkqueue "k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/metrics"
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
	// holding are the destinations whose entry holds a source of ours, as last listed;
	// nil before the first list.
	holding map[Service]bool
	// modifyIndexes are the entries' ModifyIndexes as last listed, compared for
	// equality only, to tell which entries changed.
	modifyIndexes map[Service]uint64
	// needs is nil until every list the keeper needs came once.
	needs Needs
}

// NewKeeper builds a keeper; nothing talks to Consul until Run.
func NewKeeper(cfg Config) *Keeper {
	return &Keeper{
		cfg:           cfg,
		marker:        Marker(cfg.Ownership),
		queue:         workqueue.New[Service]("intentions"),
		wake:          make(chan struct{}, 1),
		routes:        map[string]map[translate.EntryKey]Route{},
		chained:       map[string]map[Service]bool{},
		targets:       map[Service][]Service{},
		modifyIndexes: map[Service]uint64{},
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
	k.routes[kind] = routes
	k.mu.Unlock()
	k.signal()
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
	wg.Go(func() { k.watch(ctx, consulapi.ServiceIntentions, k.observeIntentions) })
	for _, kind := range chainKinds {
		wg.Go(func() {
			k.watch(ctx, kind, func(_ context.Context, entries []consulapi.ConfigEntry) { k.observeChains(kind, entries) })
		})
	}
	wg.Go(func() { k.computeLoop(ctx) })
	workqueue.Run(ctx, "intentions", k.queue, max(k.cfg.Workers, 1), k.sync)
	wg.Wait()
	return nil
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

// chainRetry is how soon a discovery chain that could not be read is read again.
const chainRetry = 30 * time.Second

func (k *Keeper) compute(ctx context.Context) {
	logger := klog.FromContext(ctx)
	k.mu.Lock()
	if !k.listedAll() {
		k.mu.Unlock()
		return
	}
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
	maps.Copy(k.targets, read)
	needs := NeedsOf(routes, k.targets)
	first := k.needs == nil
	changed := Changed(k.needs, needs)
	if first {
		// What was left by earlier runs is compared too: a source of ours that no
		// route needs any more is removed.
		for d := range k.holding {
			changed = append(changed, d)
		}
	}
	k.needs = needs
	k.mu.Unlock()
	if first {
		logger.V(2).Info("Intentions are known; comparing every destination", "destinations", len(changed))
	}
	for _, d := range changed {
		k.queue.Add(d)
	}
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
	return k.holding != nil
}

// allRoutes lists what every route of ours needs. Callers hold mu.
func (k *Keeper) allRoutes() []Route {
	var out []Route
	for _, routes := range k.routes {
		for _, r := range routes {
			out = append(out, r)
		}
	}
	return out
}

// chainsToRead returns the routed services with a chain entry whose targets are not
// known or may have changed, and forgets the targets of the others. Callers hold mu.
func (k *Keeper) chainsToRead(routes []Route) []Service {
	routed := map[Service]bool{}
	for _, r := range routes {
		for _, s := range r.Services {
			routed[s] = true
		}
	}
	var out []Service
	for s := range routed {
		if !k.hasChainEntry(s) {
			delete(k.targets, s)
			continue
		}
		if _, known := k.targets[s]; !known || k.chainsChanged {
			out = append(out, s)
		}
	}
	for s := range k.targets {
		if !routed[s] {
			delete(k.targets, s)
		}
	}
	return out
}

func (k *Keeper) hasChainEntry(s Service) bool {
	for _, names := range k.chained {
		if names[s] {
			return true
		}
	}
	return false
}

// chainTargets reads the services s's compiled discovery chain sends to. Targets in a
// peer cluster are left out: their intentions are the peer's. The answer is decoded
// here because consul/api's DiscoveryTarget has no Peer or Partition.
func (k *Keeper) chainTargets(ctx context.Context, s Service) ([]Service, error) {
	q := (&consulapi.QueryOptions{Namespace: s.Namespace, Partition: s.Partition}).WithContext(ctx)
	var resp struct {
		Chain *struct {
			Targets map[string]struct {
				Service, Namespace, Partition, Peer string
				External                            bool
			}
		}
	}
	if _, err := k.cfg.Client.Raw().Query("/v1/discovery-chain/"+url.PathEscape(s.Name), &resp, q); err != nil {
		return nil, fmt.Errorf("read the discovery chain of %s: %w", s, err)
	}
	if resp.Chain == nil {
		return []Service{s}, nil
	}
	var out []Service
	for _, t := range resp.Chain.Targets {
		if t.Peer != "" || t.External {
			continue
		}
		out = append(out, NewService(t.Service, t.Namespace, t.Partition))
	}
	return sortedUnique(out), nil
}

// observeChains records which services have an entry of a chain kind.
func (k *Keeper) observeChains(kind string, entries []consulapi.ConfigEntry) {
	names := make(map[Service]bool, len(entries))
	for _, e := range entries {
		names[NewService(e.GetName(), e.GetNamespace(), e.GetPartition())] = true
	}
	k.mu.Lock()
	k.chained[kind] = names
	k.chainsChanged = true
	k.mu.Unlock()
	k.signal()
}

// observeIntentions records which entries hold a source of ours, and queues the
// destinations whose entry changed and that hold or need one: a hand edit is put back.
func (k *Keeper) observeIntentions(ctx context.Context, entries []consulapi.ConfigEntry) {
	holding := map[Service]bool{}
	indexes := make(map[Service]uint64, len(entries))
	var changed []Service
	k.mu.Lock()
	for _, e := range entries {
		entry, ok := e.(*consulapi.ServiceIntentionsConfigEntry)
		if !ok {
			continue
		}
		d := NewService(entry.Name, entry.Namespace, entry.Partition)
		indexes[d] = entry.ModifyIndex
		for _, src := range entry.Sources {
			if src.Description == k.marker {
				holding[d] = true
			}
		}
		if k.modifyIndexes[d] != entry.ModifyIndex {
			changed = append(changed, d)
		}
	}
	for d := range k.modifyIndexes {
		if _, ok := indexes[d]; !ok {
			changed = append(changed, d) // deleted
		}
	}
	first := k.holding == nil
	k.holding, k.modifyIndexes = holding, indexes
	var queue []Service
	if k.needs != nil {
		for _, d := range changed {
			if holding[d] || len(k.needs[d]) > 0 {
				queue = append(queue, d)
			}
		}
	}
	k.mu.Unlock()
	if first {
		k.signal()
	}
	if len(queue) > 0 {
		klog.FromContext(ctx).V(4).Info("Service intentions changed in Consul; comparing them", "destinations", len(queue))
	}
	for _, d := range queue {
		k.queue.Add(d)
	}
}

// watchWait is how long one blocking list waits for a change.
const watchWait = 10 * time.Second

// watch follows every entry of kind with blocking queries and calls observe with each
// answer whose index moved. After an error, or when the index goes back (Consul lost
// its data), the kind is read again from 0.
func (k *Keeper) watch(ctx context.Context, kind string, observe func(context.Context, []consulapi.ConfigEntry)) {
	logger := klog.FromContext(ctx).WithValues("kind", kind)
	var index uint64
	for ctx.Err() == nil {
		q := (&consulapi.QueryOptions{WaitIndex: index, WaitTime: watchWait, Partition: k.cfg.Partition, RequireConsistent: index == 0}).WithContext(ctx)
		if k.cfg.AllNamespaces {
			q.Namespace = "*"
		}
		entries, meta, err := k.cfg.Client.ConfigEntries().List(kind, q)
		if err != nil {
			if ctx.Err() == nil {
				logger.V(2).Info("Watching Consul failed; retrying", "err", err)
				sleep(ctx, 5*time.Second)
			}
			index = 0
			continue
		}
		if meta.LastIndex < index {
			index = 0
			continue
		}
		if meta.LastIndex != index {
			observe(ctx, entries)
		}
		index = meta.LastIndex
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// errCASMismatch is a check-and-set that found the entry changed since it was read.
var errCASMismatch = errors.New("the service-intentions entry changed since it was read")

// sync makes dest's service-intentions entry hold exactly the sources of ours its
// routes need, by check-and-set on the entry as just read.
func (k *Keeper) sync(ctx context.Context, dest Service) error {
	k.mu.Lock()
	known := k.needs != nil
	want := maps.Clone(k.needs[dest])
	k.mu.Unlock()
	if !known {
		return nil // the first computation queues every destination
	}
	logger := klog.FromContext(ctx).WithValues("destination", dest)
	current, err := k.read(ctx, dest)
	if err != nil {
		return err
	}
	meta := k.cfg.Ownership.Meta(translate.Owner{Kind: "ServiceIntentions", Name: dest.Name})
	plan := PlanEntry(current, dest, want, k.marker, meta)
	if plan.ManagedElsewhere && len(want) > 0 {
		logger.V(2).Info("The destination's intentions are managed by a consul-k8s ServiceIntentions resource; allow the gateways there", "gateways", sortedKeys(want))
	}
	if len(plan.Foreign) > 0 {
		logger.V(2).Info("A source this controller did not write already names these gateways; it is left as it is", "gateways", plan.Foreign)
	}
	w := (&consulapi.WriteOptions{Namespace: dest.Namespace, Partition: dest.Partition}).WithContext(ctx)
	var index uint64
	if current != nil {
		index = current.ModifyIndex
	}
	switch {
	case plan.Delete:
		ok, _, err := k.cfg.Client.ConfigEntries().DeleteCAS(consulapi.ServiceIntentions, dest.Name, index, w)
		return k.written(logger, "delete", ok, err, "Deleted service intentions left with no source", want)
	case plan.Entry != nil:
		op := "update"
		if current == nil {
			op = "create"
		}
		ok, _, err := k.cfg.Client.ConfigEntries().CAS(consul.Compact(plan.Entry), index, w)
		return k.written(logger, op, ok, err, "Wrote service intentions", want)
	}
	return nil
}

// written counts and logs one check-and-set write.
func (k *Keeper) written(logger klog.Logger, op string, ok bool, err error, msg string, gateways map[Service]bool) error {
	result := metrics.ResultOK
	switch {
	case err != nil:
		result = metrics.ResultError
	case !ok:
		result = metrics.ResultConflict
	}
	metrics.ConsulWrites.WithLabelValues(consulapi.ServiceIntentions, op, result).Inc()
	if err != nil {
		return fmt.Errorf("%s service-intentions: %w", op, err)
	}
	if !ok {
		return workqueue.Expected(errCASMismatch)
	}
	logger.V(2).Info(msg, "gateways", sortedKeys(gateways))
	return nil
}

// read returns dest's service-intentions entry, nil when Consul has none.
func (k *Keeper) read(ctx context.Context, dest Service) (*consulapi.ServiceIntentionsConfigEntry, error) {
	q := (&consulapi.QueryOptions{Namespace: dest.Namespace, Partition: dest.Partition, RequireConsistent: true}).WithContext(ctx)
	entry, _, err := k.cfg.Client.ConfigEntries().Get(consulapi.ServiceIntentions, dest.Name, q)
	var status consulapi.StatusError
	if errors.As(err, &status) && status.Code == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the service-intentions of %s: %w", dest, err)
	}
	intentions, ok := entry.(*consulapi.ServiceIntentionsConfigEntry)
	if !ok {
		return nil, fmt.Errorf("read the service-intentions of %s: Consul answered a %T", dest, entry)
	}
	return intentions, nil
}
