package consul

import (
	"context"
	"fmt"
	"maps"
	gosync "sync"
	"sync/atomic"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/klog/v2"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

// servicesTimeout bounds how long the status workers wait at start for the first list
// of Consul's services; past it, or once a list failed, every service counts as known
// until a list comes.
const servicesTimeout = 30 * time.Second

// outsideKubernetesFilter selects the instances of typical services that consul-k8s
// did not register: its endpoints controller records the pod's namespace on every
// instance (translate.KubeNamespaceMeta), an agent on a VM or another platform does not.
var outsideKubernetesFilter = fmt.Sprintf("ServiceKind == \"\" and %q not in ServiceMeta", translate.KubeNamespaceMeta)

// ServiceNames follows the names of the services in Consul's catalog (one namespace
// and partition), so that the status pipeline can say that a MeshService names a
// service Consul does not hold, and which names have instances registered outside
// Kubernetes. It reads only: two blocking lists of the catalog's service names (all,
// and those with such an instance), each from index 0 consistently (see listOptions).
type ServiceNames struct {
	client    *consulapi.Client
	partition string

	mu    gosync.RWMutex
	names map[string]bool
	// outside are the names with an instance registered outside Kubernetes; nil
	// before their first list.
	outside map[string]bool
	synced  atomic.Bool
	// gaveUp: the status workers started before the first list, counting every name
	// as known; the first list must then have every MeshService judged again.
	gaveUp  atomic.Bool
	changed func(name string)
}

// NewServiceNames returns a watch of the services of partition ("" on Consul CE) in
// the default namespace.
func NewServiceNames(client *consulapi.Client, partition string) *ServiceNames {
	return &ServiceNames{client: client, partition: partition}
}

// OnChange calls changed with each service name that appears or disappears, or whose
// instances outside Kubernetes do, and with "" when any may have: the first list after
// the start gave up waiting for it. Call it before Run.
func (s *ServiceNames) OnChange(changed func(name string)) { s.changed = changed }

// Known reports whether Consul's catalog has a service name. Before the first list
// every name is known: a route is never refused for what is not known.
func (s *ServiceNames) Known(name string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.names == nil || s.names[name]
}

// RegisteredOutsideKubernetes reports whether Consul's catalog has an instance of the
// service name that consul-k8s did not register. Before the first list none has.
func (s *ServiceNames) RegisteredOutsideKubernetes(name string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.outside[name]
}

// HasSynced reports whether both lists were read (or given up on at start).
func (s *ServiceNames) HasSynced() bool { return s.synced.Load() }

// Run lists the catalog's services until ctx is done, blocking for changes.
func (s *ServiceNames) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("consul-services")
	giveUp := func(why string) {
		if !s.synced.Swap(true) {
			s.gaveUp.Store(true)
			logger.Info("Consul's services not listed; every service counts as registered until they are", "why", why)
		}
	}
	timer := time.AfterFunc(servicesTimeout, func() { giveUp("not listed within " + servicesTimeout.String()) })
	defer timer.Stop()
	var wg gosync.WaitGroup
	wg.Go(func() { s.watch(ctx, logger, "", giveUp, s.replaceNames) })
	wg.Go(func() { s.watch(ctx, logger, outsideKubernetesFilter, giveUp, s.replaceOutside) })
	wg.Wait()
}

// watch lists the names of the catalog's services whose instances filter selects
// ("" all) until ctx is done, and hands each answer to replace.
func (s *ServiceNames) watch(ctx context.Context, logger klog.Logger, filter string, giveUp func(string), replace func(context.Context, map[string]bool)) {
	var index uint64
	backoff := WatchBackoff()
	for ctx.Err() == nil {
		q := (&consulapi.QueryOptions{WaitIndex: index, WaitTime: watchWait, Partition: s.partition, RequireConsistent: index == 0, Filter: filter}).WithContext(ctx)
		services, meta, err := s.client.Catalog().Services(q)
		if err != nil {
			// The status workers do not wait for a Consul that fails: statuses
			// start, and what the list would refuse is judged again once it comes.
			giveUp("the first list failed")
			if ctx.Err() == nil {
				logger.V(2).Info("Listing Consul's services failed; retrying", "filter", filter, "err", err)
				sleep(ctx, backoff.Step())
			}
			index = 0
			continue
		}
		backoff = WatchBackoff()
		if meta.LastIndex < index {
			index = 0 // Consul went back (restarted empty or restored): list again from 0
			continue
		}
		index = meta.LastIndex
		names := make(map[string]bool, len(services))
		for name := range services {
			names[name] = true
		}
		replace(ctx, names)
	}
}

// replaceNames records the names of the catalog's services and reports those that
// changed.
func (s *ServiceNames) replaceNames(ctx context.Context, names map[string]bool) {
	s.mu.Lock()
	old := s.names
	s.names = names
	listed := s.outside != nil
	s.mu.Unlock()
	s.report(ctx, old, names, "Consul service", listed)
}

// replaceOutside records the names with an instance outside Kubernetes and reports
// those that changed; the first list reports every name in it, as none counted before.
func (s *ServiceNames) replaceOutside(ctx context.Context, names map[string]bool) {
	s.mu.Lock()
	old := s.outside
	s.outside = names
	listed := s.names != nil
	s.mu.Unlock()
	if old == nil {
		old = map[string]bool{}
	}
	s.report(ctx, old, names, "Consul service registered outside Kubernetes", listed)
}

// report marks the watch synced once both lists were read, and tells OnChange's
// function which names are in one of old and names only. A first list (old nil)
// reports nothing, or "" when the workers started without it.
func (s *ServiceNames) report(ctx context.Context, old, names map[string]bool, what string, bothListed bool) {
	if bothListed {
		s.synced.Store(true)
	}
	if s.changed == nil {
		return
	}
	if old == nil {
		if s.gaveUp.Load() {
			s.changed("")
		}
		return
	}
	for name := range maps.Keys(names) {
		if !old[name] {
			klog.FromContext(ctx).V(4).Info(what+" appeared", "service", name)
			s.changed(name)
		}
	}
	for name := range maps.Keys(old) {
		if !names[name] {
			klog.FromContext(ctx).V(4).Info(what+" disappeared", "service", name)
			s.changed(name)
		}
	}
}
