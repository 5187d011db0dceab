package contract

import (
	gosync "sync"

	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// gatewayKind is the Gateway's kind; the contract reads no more of the Gateway API's
// shared readings than this name.
const gatewayKind gatewayv1.Kind = "Gateway"

// AcceptedGateways is what a leader-only writer acting per Gateway (the catalog
// registrar, the identity manager) keeps of the confirmations: the Gateways accepted at
// their generation, and every Gateway it has heard of, so that what it made for one
// that went is removed. It is safe for concurrent use.
type AcceptedGateways struct {
	mu       gosync.Mutex
	accepted map[cache.ObjectName]*gatewayv1.Gateway
	known    map[cache.ObjectName]bool
}

// NewAcceptedGateways returns an empty record.
func NewAcceptedGateways() *AcceptedGateways {
	return &AcceptedGateways{accepted: map[cache.ObjectName]*gatewayv1.Gateway{}, known: map[cache.ObjectName]bool{}}
}

// Record takes a confirmation: a Gateway accepted at its current generation is
// accepted, any other Gateway known only. ok is false for other kinds.
func (g *AcceptedGateways) Record(c Confirmation) (key cache.ObjectName, ok bool) {
	if c.Kind != gatewayKind {
		return cache.ObjectName{}, false
	}
	gw, isGateway := c.Object.(*gatewayv1.Gateway)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.known[c.Key] = true
	if isGateway && AcceptedAtGeneration(gw) {
		g.accepted[c.Key] = gw
	} else {
		delete(g.accepted, c.Key)
	}
	return c.Key, true
}

// Know records a Gateway that something found in the writer's own store names (an
// object made for it), so that it is compared even without a confirmation.
func (g *AcceptedGateways) Know(key cache.ObjectName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.known[key] = true
}

// Get returns the accepted Gateway (nil when it is not accepted), and whether the
// Gateway is known at all.
func (g *AcceptedGateways) Get(key cache.ObjectName) (gw *gatewayv1.Gateway, known bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.accepted[key], g.known[key]
}

// Known lists every known Gateway.
func (g *AcceptedGateways) Known() []cache.ObjectName {
	g.mu.Lock()
	defer g.mu.Unlock()
	keys := make([]cache.ObjectName, 0, len(g.known))
	for k := range g.known {
		keys = append(keys, k)
	}
	return keys
}

// ForgetIfGone drops a Gateway whose objects are all gone, unless a confirmation made
// it accepted again meanwhile: nothing is left to compare for it.
func (g *AcceptedGateways) ForgetIfGone(key cache.ObjectName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, accepted := g.accepted[key]; !accepted {
		delete(g.known, key)
	}
}
