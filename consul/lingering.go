package consul

import (
	"time"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

// ServiceDefaultsGrace is how long the service-defaults of a Service that still exists
// outlive the last route naming it. A route replaced by another (an edit that moves a
// backend between routes, a test suite's next case) would otherwise delete and
// re-create them within milliseconds, and each time the service's protocol flips under
// the gateways that still serve the old route. Consul 1.15.4's api-gateway proxy state
// then resets the upstream's discovery chain and can stop watching its endpoints for
// good: its routes keep naming a cluster that CDS no longer sends, and Envoy answers
// 503 until something else resets the chain (seen in the conformance suite's traffic
// run: "stopping watch of target" with no "initializing watch" after it).
const ServiceDefaultsGrace = 30 * time.Second

// undesiredSince holds when each entry of ours was first found no longer desired.
type undesiredSince struct {
	since map[translate.EntryKey]time.Time
}

// serviceDefaultsGrace returns how much longer an owned service-defaults entry that
// nothing desires is kept: zero for other kinds, when the Service it was written for
// is gone, and once the grace has passed.
func (s *Syncer) serviceDefaultsGrace(key translate.EntryKey, meta map[string]string) time.Duration {
	if key.Kind != consulapi.ServiceDefaults || s.cfg.ServiceDefaultsGrace <= 0 || s.cfg.Services == nil {
		return 0
	}
	owner := translate.OwnerOf(meta)
	if owner.Kind != "Service" {
		return 0
	}
	svc, err := s.cfg.Services.Services(owner.Namespace).Get(owner.Name)
	if err != nil || string(svc.UID) != owner.UID {
		return 0
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	first, ok := s.undesired.since[key]
	if !ok {
		first = now
		s.undesired.since[key] = now
	}
	return max(0, s.cfg.ServiceDefaultsGrace-now.Sub(first))
}

// forgetUndesired forgets when an entry was first found undesired: it is desired again, or gone.
func (s *Syncer) forgetUndesired(key translate.EntryKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.undesired.since, key)
}
