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

// entryState gathers what decide needs of key before a read: the ledger's line.
func (s *Syncer) entryState(key translate.EntryKey) entryState {
	return s.ledger.stateOf(key)
}

// withActual adds what a read found to st: the entry Consul holds (nil for none), and
// for an entry of ours that nothing desires, what may hold its delete back. Those are
// gathered in the order decideUndesired asks them, and no further than the first that
// holds it back: the grace of a service-defaults starts when it is first asked.
func (s *Syncer) withActual(st entryState, actual consulapi.ConfigEntry) entryState {
	st.read, st.actual = true, actual
	if actual == nil {
		return st
	}
	st.owned = s.cfg.Ownership.Owns(actual.GetMeta())
	if st.desired != nil || !st.owned {
		return st
	}
	if st.ownerUnconfirmed = s.unconfirmedOwner(actual.GetMeta()); st.ownerUnconfirmed {
		return st
	}
	if st.graceLeft = s.serviceDefaultsGrace(st.key, actual.GetMeta()); st.graceLeft > 0 {
		return st
	}
	st.referrers = s.leavingReferrers(st.key)
	return st
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
	return max(0, s.cfg.ServiceDefaultsGrace-now.Sub(s.ledger.undesiredSince(key, now)))
}

// unconfirmedOwner reports whether an entry belongs to a Gateway or route that exists
// but has not been confirmed: nothing is known of what it should hold.
func (s *Syncer) unconfirmedOwner(meta map[string]string) bool {
	owner, ok := reportedOwner(meta)
	if !ok || s.cfg.OwnerExists == nil {
		return false
	}
	s.mu.Lock()
	confirmed := s.confirmed[owner]
	s.mu.Unlock()
	return !confirmed && s.cfg.OwnerExists(owner.kind, owner.key)
}
