package sync

import (
	"cmp"
	"slices"
	"strings"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// Where Consul 1.15 sends a request on one listener.
//
// Consul (agent/consul/discoverychain/gateway.go, AddHTTPRoute and
// consolidateHTTPRoutes): each hostname key of the listener is a virtual host holding
// the matches of the routes filed under it, flattened in the order Consul binds the
// routes and stable-sorted by path value length, then header count, then query count
// (compareHTTPRules). Envoy picks the virtual host by the Host header (an exact domain,
// then the longest wildcard suffix, then "*") and takes its first matching route.

// consulMatch is one match of Consul's http-route entry as the translation writes it:
// PathPrefix "/foo" becomes exact "/foo" and prefix "/foo/" (segmentPrefixes).
type consulMatch struct {
	ruleRef
	path      pathKind
	pathValue string
	// exactInSpec is true for an Exact match of the route itself: the translation
	// lists it before equal-length matches derived from a PathPrefix.
	exactInSpec bool
	order       int // position in the route's entry
	from        routeMatch
}

// consulKey is what Consul sorts a virtual host's matches by (compareHTTPRules).
func (m consulMatch) consulKey() [3]int {
	return [3]int{len(m.pathValue), len(m.from.headers), len(m.from.query)}
}

func (m consulMatch) matches(r exampleRequest) bool {
	switch m.path {
	case pathExact:
		if r.path != m.pathValue {
			return false
		}
	case pathRegex:
		if !m.from.pathRegex.MatchString(r.path) {
			return false
		}
	default:
		if !strings.HasPrefix(r.path, m.pathValue) {
			return false
		}
	}
	return m.from.matchesRest(r)
}

// consulMatches are the matches of route ri as the translation writes them, in order.
func consulMatches(ri int, rules [][]routeMatch) []consulMatch {
	var out []consulMatch
	add := func(rule int, m routeMatch, kind pathKind, value string) {
		out = append(out, consulMatch{ruleRef: ruleRef{ri, rule}, path: kind, pathValue: value,
			exactInSpec: m.path == pathExact, order: len(out), from: m})
	}
	for rule, matches := range rules {
		for _, m := range matches {
			prefix := strings.TrimSuffix(m.pathValue, "/")
			if m.path != pathPrefix || prefix == "" {
				add(rule, m, m.path, m.pathValue)
				continue
			}
			add(rule, m, pathExact, prefix)
			add(rule, m, pathPrefix, prefix+"/")
		}
	}
	return out
}

// consulFirst reports whether, within one route's entry, Consul tries a before b.
func consulFirst(a, b consulMatch) bool {
	ka, kb := a.consulKey(), b.consulKey()
	if c := slices.Compare(ka[:], kb[:]); c != 0 {
		return c > 0
	}
	if a.exactInSpec != b.exactInSpec {
		return a.exactInSpec
	}
	return a.order < b.order
}

// virtualHost is the hostname key whose virtual host Envoy picks for host, among the
// keys of the listener's routes: the exact domain, then the longest wildcard suffix,
// then anyHost. ok is false when none serves the host.
func (t *listenerTable) virtualHost(host string) (string, bool) {
	best, ok := "", false
	for _, route := range t.routes {
		for _, key := range route.consulHosts {
			if !hostKeyServes(key, host) {
				continue
			}
			if !ok || hostKeyMoreSpecific(key, best) {
				best, ok = key, true
			}
		}
	}
	return best, ok
}

func hostKeyServes(key, host string) bool {
	return key == anyHost || key == host || gatewayapi.WildcardMatches(gatewayv1.Hostname(key), gatewayv1.Hostname(host))
}

// hostKeyMoreSpecific orders Envoy's domain matching: exact, longer wildcard, "*".
func hostKeyMoreSpecific(a, b string) bool {
	wildA, wildB := strings.HasPrefix(a, "*"), strings.HasPrefix(b, "*")
	if wildA != wildB {
		return !wildA
	}
	return len(a) > len(b)
}

// consulOutcome is where Consul may send a request: the virtual host it picks and the
// rules that may answer it, one per route whose first matching match is among the
// highest sorted (the routes' binding order decides between them). No rules is a 404.
type consulOutcome struct {
	host  string
	rules []consulMatch
}

// consulWinners is where Consul may send r; ok is false when a regex path is among
// the matches that could answer it (see specWinner).
func (t *listenerTable) consulWinners(r exampleRequest) (consulOutcome, bool) {
	host, found := t.virtualHost(r.host)
	out := consulOutcome{host: host}
	if !found {
		return out, true
	}
	var best [3]int
	firstByRoute := map[int]consulMatch{}
	for ri, route := range t.routes {
		if !slices.Contains(route.consulHosts, host) {
			continue
		}
		for _, m := range t.consulMatchesOf(ri) {
			if !m.matches(r) {
				continue
			}
			if m.path == pathRegex {
				return out, false
			}
			key := m.consulKey()
			if c := slices.Compare(key[:], best[:]); c > 0 || len(firstByRoute) == 0 {
				best, firstByRoute = key, map[int]consulMatch{}
			} else if c < 0 {
				continue
			}
			if prev, ok := firstByRoute[ri]; !ok || consulFirst(m, prev) {
				firstByRoute[ri] = m
			}
		}
	}
	for _, m := range firstByRoute {
		out.rules = append(out.rules, m)
	}
	slices.SortFunc(out.rules, func(a, b consulMatch) int {
		return cmp.Or(cmp.Compare(a.route, b.route), cmp.Compare(a.rule, b.rule))
	})
	return out, true
}
