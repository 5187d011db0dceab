package consul

import (
	"context"
	"maps"
	gosync "sync"
	"sync/atomic"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/klog/v2"
)

// servicesTimeout bounds how long the status workers wait at start for the first list
// of Consul's services; past it, or once a list failed, every service counts as known
// until a list comes.
const servicesTimeout = 30 * time.Second

// ServiceNames follows the names of the services in Consul's catalog (one namespace
// and partition), so that the status pipeline can say that a MeshService names a
// service Consul does not hold. It reads only: a blocking list of the catalog's
// service names, from index 0 consistently (see listOptions).
type ServiceNames struct {
	client    *consulapi.Client
	partition string

	mu     gosync.RWMutex
	names  map[string]bool
	synced atomic.Bool
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

// OnChange calls changed with each service name that appears or disappears, and with
// "" when any may have: the first list after the start gave up waiting for it. Call it
// before Run.
func (s *ServiceNames) OnChange(changed func(name string)) { s.changed = changed }

// Known reports whether Consul's catalog has a service name. Before the first list
// every name is known: a route is never refused for what is not known.
func (s *ServiceNames) Known(name string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.names == nil || s.names[name]
}

// HasSynced reports whether the first list was read (or given up on at start).
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
	var index uint64
	backoff := WatchBackoff()
	for ctx.Err() == nil {
		q := (&consulapi.QueryOptions{WaitIndex: index, WaitTime: watchWait, Partition: s.partition, RequireConsistent: index == 0}).WithContext(ctx)
		services, meta, err := s.client.Catalog().Services(q)
		if err != nil {
			// The status workers do not wait for a Consul that fails: statuses
			// start, and what the list would refuse is judged again once it comes.
			giveUp("the first list failed")
			if ctx.Err() == nil {
				logger.V(2).Info("Listing Consul's services failed; retrying", "err", err)
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
		s.replace(ctx, services)
	}
}

// replace records the names of services and reports those that changed.
func (s *ServiceNames) replace(ctx context.Context, services map[string][]string) {
	names := make(map[string]bool, len(services))
	for name := range services {
		names[name] = true
	}
	s.mu.Lock()
	old := s.names
	s.names = names
	s.mu.Unlock()
	s.synced.Store(true)
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
			klog.FromContext(ctx).V(4).Info("Consul service appeared", "service", name)
			s.changed(name)
		}
	}
	for name := range maps.Keys(old) {
		if !names[name] {
			klog.FromContext(ctx).V(4).Info("Consul service disappeared", "service", name)
			s.changed(name)
		}
	}
}
