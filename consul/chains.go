package consul

import (
	"context"
	"maps"
	"slices"
	gosync "sync"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/klog/v2"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

// Consul 1.15.4 forgets a backend that comes back to a gateway. The gateway's proxy
// state keeps watching a backend's discovery chain after the last route to it is
// unbound, until some other route of the gateway changes; if the chain fires in that
// window (any write near its config entries will do, the route's own removal often
// does), Consul drops the chain but keeps the watch (agent/proxycfg/upstreams.go,
// "discovery-chain watch fired for unknown upstream"). A route to that backend bound
// later starts no new watch, and the gateway serves it without the backend: no
// listener, or a cluster CDS never sent, until the chain changes again. Deleting a
// route and applying it again is enough to meet it (test/xds TestUnboundChainIsForgotten).
//
// The syncer changes the chain itself once the route is bound again: it writes the
// backend's service-defaults, when they are ours, with the next metaChainRefresh
// value, a change Consul's chain watch sees. Only a backend that a new route binds to a
// gateway where the routes that bound it went is refreshed (see observe),
// chainRefreshDelay after the watch saw it bound, so that the gateway's proxy state has
// taken the route first. Service-defaults that are not ours
// are never written; docs/status.md tells their owners what to do.
const (
	chainRefreshDelay = time.Second
	// metaChainRefresh counts those writes. It is not part of the desired state: the
	// comparison with Consul's entry ignores it.
	metaChainRefresh = "gateway-controller-chain-refresh"
)

// boundBackend is one backend some route of ours has bound to one gateway, as Consul
// says: the gateway as Consul's Bound condition names it, the backend's
// service-defaults as desired.
type boundBackend struct {
	gateway  consulapi.ResourceReference
	defaults translate.EntryKey
}

// routeBinding is one route entry, in one incarnation (its CreateIndex, compared for
// equality only), binding a backend to a gateway.
type routeBinding struct {
	backend     boundBackend
	route       translate.EntryKey
	createIndex uint64
}

// chainRefresher remembers which routes bound which backends to which gateway, per
// route kind. Which service-defaults wait for a refresh is the ledger's
// (entryLine.refreshChain).
type chainRefresher struct {
	mu gosync.Mutex
	// bound is what the last answer of each kind's watch showed; nil before one.
	bound map[string]map[routeBinding]bool
	// left are backends seen bound to a gateway and then by no route: the gateway may
	// have forgotten them.
	left map[boundBackend]bool
}

func newChainRefresher() *chainRefresher {
	return &chainRefresher{
		bound: map[string]map[routeBinding]bool{},
		left:  map[boundBackend]bool{},
	}
}

// observe takes the bindings of kind's routes in one answer of the watch, and returns
// the service-defaults of backends a new route binds to a gateway where a route that
// bound them went: since the last answer (one route replaced by another between two
// answers), or earlier (the backend had left the gateway). A backend that stays bound
// by some route throughout is never refreshed. A fresh answer (a start, a reconnect, a
// Consul that lost its data) only sets what is bound: this process cannot know what the
// gateways forgot before it.
func (r *chainRefresher) observe(kind string, now map[routeBinding]bool, fresh bool) []translate.EntryKey {
	r.mu.Lock()
	defer r.mu.Unlock()
	before := r.bound[kind]
	r.bound[kind] = now
	if fresh || before == nil {
		return nil
	}
	went := map[boundBackend]bool{}
	for b := range before {
		if !now[b] {
			went[b.backend] = true
		}
	}
	stays := map[boundBackend]bool{}
	again := map[translate.EntryKey]bool{}
	for b := range now {
		stays[b.backend] = true
		if before[b] || !went[b.backend] && !r.left[b.backend] {
			continue
		}
		again[b.backend.defaults] = true
	}
	for backend := range stays {
		delete(r.left, backend)
	}
	for backend := range went {
		if !stays[backend] {
			r.left[backend] = true
		}
	}
	return slices.SortedFunc(maps.Keys(again), compareKeys)
}

// routeBindings lists, for the route entries of one kind in a watch answer, each backend an
// owned and desired route has bound to a gateway.
func (s *Syncer) routeBindings(entries []consulapi.ConfigEntry) map[routeBinding]bool {
	out := map[routeBinding]bool{}
	for _, entry := range entries {
		if !s.cfg.Ownership.Owns(entry.GetMeta()) {
			continue
		}
		key := translate.KeyOf(entry)
		desired, ok := s.desiredEntry(key)
		if !ok {
			continue
		}
		for _, c := range EntryStatus(entry).Conditions {
			if c.Type != string(consulapi.RouteConditionBound) || c.Status != consulapi.ConditionStatusTrue || c.Resource == nil {
				continue
			}
			gateway := consulapi.ResourceReference{Kind: c.Resource.Kind, Name: c.Resource.Name, Namespace: c.Resource.Namespace, Partition: c.Resource.Partition}
			for _, svc := range routeServices(desired) {
				backend := boundBackend{gateway: gateway, defaults: translate.EntryKey{
					Kind: consulapi.ServiceDefaults, Name: svc.Name, Namespace: svc.Namespace, Partition: svc.Partition,
				}}
				out[routeBinding{backend: backend, route: key, createIndex: entry.GetCreateIndex()}] = true
			}
		}
	}
	return out
}

// refreshChainsOf queues a refresh of the backends kind's routes bound again.
func (s *Syncer) refreshChainsOf(ctx context.Context, kind string, entries []consulapi.ConfigEntry, fresh bool) {
	if kind != consulapi.HTTPRoute && kind != consulapi.TCPRoute {
		return
	}
	for _, key := range s.chains.observe(kind, s.routeBindings(entries), fresh) {
		if _, ours := s.desiredEntry(key); !ours {
			klog.FromContext(ctx).V(4).Info("A backend is bound again to a gateway it had left, and its service-defaults are not ours to write; "+
				"Consul 1.15 may not serve it until its discovery chain changes", "service", key.Name)
			continue
		}
		s.ledger.requestChainRefresh(key)
		s.queue.AddAfter(key, chainRefreshDelay)
	}
}
