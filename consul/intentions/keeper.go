package intentions

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
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
	k.routes[kind] = routes
	k.mu.Unlock()
	k.signal()
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

// chainRetry is how soon a discovery chain that could not be read is read again.
const chainRetry = 30 * time.Second

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
	changed := Changed(k.needs, needs)
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

// observeIntentions records the service-intentions entries Consul holds and, once the
// needs are known, queues every destination whose entry is not what they ask: a hand
// edit is put back, and so is an entry Consul lost. A destination whose entry is as
// needed is not queued, so a converged keeper reads and writes nothing.
func (k *Keeper) observeIntentions(ctx context.Context, entries []consulapi.ConfigEntry) {
	listed := make(map[Service]*consulapi.ServiceIntentionsConfigEntry, len(entries))
	for _, e := range entries {
		if entry, ok := e.(*consulapi.ServiceIntentionsConfigEntry); ok {
			listed[NewService(entry.Name, entry.Namespace, entry.Partition)] = entry
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.listed = listed
	if k.needs == nil {
		k.signal() // the needs may be computed now
		return
	}
	misjudged := k.misjudged()
	if len(misjudged) > 0 {
		klog.FromContext(ctx).V(4).Info("Service intentions in Consul differ from what the routes need", "destinations", len(misjudged))
	}
	k.add(misjudged)
}

// watchWait is how long one blocking list waits for a change.
const watchWait = 10 * time.Second

// watch follows every entry of kind with blocking queries and calls observe with each
// answer whose index moved. After an error, or when the index goes back (Consul lost
// its data), the kind is read again from 0, consistently; retries are paced as the
// syncer's watch paces its own.
func (k *Keeper) watch(ctx context.Context, kind string, observe func(context.Context, []consulapi.ConfigEntry)) {
	logger := klog.FromContext(ctx).WithValues("kind", kind)
	backoff := consul.WatchBackoff()
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
				sleep(ctx, backoff.Step())
			}
			index = 0
			continue
		}
		backoff = consul.WatchBackoff()
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
	known, epoch := k.needs != nil, k.epoch
	want := maps.Clone(k.needs[dest])
	k.mu.Unlock()
	if !known {
		return nil // the next computation judges every destination
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
	if !k.stillKnown(epoch) {
		return nil // Consul may have lost its data while the entry was read
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

// stillKnown reports whether the needs of epoch are still the keeper's.
func (k *Keeper) stillKnown(epoch uint64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.needs != nil && k.epoch == epoch
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
