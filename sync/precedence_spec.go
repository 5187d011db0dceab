package sync

import (
	"cmp"
	"strings"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// Where Gateway API sends a request on one listener: HTTPRouteSpec.Hostnames and
// HTTPRouteRule precedence.

// hostRank is how well a route's hostname matches a request's host, per
// HTTPRouteSpec.Hostnames: characters of a matching non-wildcard hostname, then of a
// matching hostname.
type hostRank struct{ exact, any int }

func (a hostRank) compare(b hostRank) int {
	return cmp.Or(cmp.Compare(a.exact, b.exact), cmp.Compare(a.any, b.any))
}

// specHostRank is the best rank of hostnames for host; ok is false when none matches.
func specHostRank(hostnames []string, host string) (hostRank, bool) {
	best, ok := hostRank{}, false
	for _, h := range hostnames {
		var rank hostRank
		switch {
		case h == anyHost:
		case h == host:
			rank = hostRank{exact: len(h), any: len(h)}
		case gatewayapi.WildcardMatches(gatewayv1.Hostname(h), gatewayv1.Hostname(host)):
			rank = hostRank{any: len(h)}
		default:
			continue
		}
		if !ok || rank.compare(best) > 0 {
			best, ok = rank, true
		}
	}
	return best, ok
}

// ruleRef names one rule of a route of a listenerTable.
type ruleRef struct{ route, rule int }

// specCandidate is a match Gateway API considers for a request.
type specCandidate struct {
	ruleRef
	match routeMatch
	host  hostRank
}

// specPrecedence compares two matches by HTTPRouteRule's criteria, before the route
// and rule tie-breaks: Exact path, longest prefix, method, most headers, most query
// params. Higher is preferred.
func specPrecedence(a, b routeMatch) int {
	pathRank := func(m routeMatch) int {
		if m.path == pathExact {
			return 1
		}
		return 0
	}
	prefixLen := func(m routeMatch) int { return len(strings.TrimSuffix(m.pathValue, "/")) }
	hasMethod := func(m routeMatch) int {
		if m.method != "" {
			return 1
		}
		return 0
	}
	return cmp.Or(
		cmp.Compare(pathRank(a), pathRank(b)),
		cmp.Compare(prefixLen(a), prefixLen(b)),
		cmp.Compare(hasMethod(a), hasMethod(b)),
		cmp.Compare(len(a.headers), len(b.headers)),
		cmp.Compare(len(a.query), len(b.query)),
	)
}

// specBefore reports whether Gateway API prefers a over b: hostname, then match
// precedence, then the oldest route, then namespace/name, then rule order.
func (t *listenerTable) specBefore(a, b specCandidate) bool {
	if c := a.host.compare(b.host); c != 0 {
		return c > 0
	}
	if c := specPrecedence(a.match, b.match); c != 0 {
		return c > 0
	}
	ra, rb := t.routes[a.route], t.routes[b.route]
	if !ra.created.Equal(rb.created) {
		return ra.created.Before(rb.created)
	}
	if ra.key != rb.key {
		return ra.key.String() < rb.key.String()
	}
	return a.rule < b.rule
}

// specWinner is the match Gateway API sends r to; ok is false when none matches or
// when a regex path is among the matches (its precedence is implementation-specific,
// so any answer is the spec's).
func (t *listenerTable) specWinner(r exampleRequest) (specCandidate, bool) {
	var best specCandidate
	found := false
	for ri, route := range t.routes {
		rank, ok := specHostRank(route.hostnames, r.host)
		if !ok {
			continue
		}
		for rule, matches := range route.rules {
			for _, m := range matches {
				if !m.specMatches(r) {
					continue
				}
				if m.path == pathRegex {
					return specCandidate{}, false
				}
				c := specCandidate{ruleRef{ri, rule}, m, rank}
				if !found || t.specBefore(c, best) {
					best, found = c, true
				}
			}
		}
	}
	return best, found
}
