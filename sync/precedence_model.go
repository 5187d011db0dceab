package sync

import (
	"time"

	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// This file and precedence_matches.go, precedence_spec.go and precedence_consul.go
// model, for the HTTPRoutes served on one listener, where Gateway API
// (HTTPRouteRule and HTTPRouteSpec.Hostnames precedence) and Consul 1.15 send one
// request. They are pure: precedence.go feeds them from the caches.

// anyHost stands for every host: the key of a route without hostnames on a listener
// without hostname.
const anyHost = "*"

// attachedRoute is an HTTPRoute (or TCPRoute, without rules) served on one listener.
type attachedRoute struct {
	key     cache.ObjectName
	created time.Time
	// hostnames are those Gateway API serves it under on the listener: the
	// intersections with the listener's hostname, anyHost when neither has any.
	hostnames []string
	// consulHosts are the hostname keys Consul files its matches under (the
	// translation writes the intersections, less those a wildcard among them covers).
	consulHosts []string
	rules       [][]routeMatch
}

// listenerTable is what one listener serves.
type listenerTable struct {
	name     gatewayv1.SectionName
	hostname string // "" when the listener has none
	routes   []attachedRoute
	// consul holds each route's consulMatches once computed.
	consul [][]consulMatch
}

// consulMatchesOf returns route ri's consulMatches, computed once.
func (t *listenerTable) consulMatchesOf(ri int) []consulMatch {
	if t.consul == nil {
		t.consul = make([][]consulMatch, len(t.routes))
		for i, r := range t.routes {
			t.consul[i] = consulMatches(i, r.rules)
		}
	}
	return t.consul[ri]
}
