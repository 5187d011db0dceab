package sync

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// This file models, for the HTTPRoutes served on one listener, where Gateway API
// (HTTPRouteRule and HTTPRouteSpec.Hostnames precedence) and Consul 1.15 send one
// request. It is pure: precedence.go feeds it from the caches.
//
// Consul (agent/consul/discoverychain/gateway.go, AddHTTPRoute and
// consolidateHTTPRoutes): each hostname key of the listener is a virtual host holding
// the matches of the routes filed under it, flattened in the order Consul binds the
// routes and stable-sorted by path value length, then header count, then query count
// (compareHTTPRules). Envoy picks the virtual host by the Host header (an exact domain,
// then the longest wildcard suffix, then "*") and takes its first matching route.

// anyHost stands for every host: the key of a route without hostnames on a listener
// without hostname.
const anyHost = "*"

// pathKind is the type of a path match.
type pathKind int

const (
	pathPrefix pathKind = iota
	pathExact
	pathRegex
)

// valueMatch is a header or query param match.
type valueMatch struct {
	name  string // lower-cased for headers, whose names are case-insensitive
	value string
	regex *regexp.Regexp // nil for an Exact match
}

func (v valueMatch) matches(got string, present bool) bool {
	if !present {
		return false
	}
	if v.regex != nil {
		return v.regex.MatchString(got)
	}
	return got == v.value
}

// routeMatch is one HTTPRouteMatch with the CRD defaults applied.
type routeMatch struct {
	path      pathKind
	pathValue string
	pathRegex *regexp.Regexp
	method    string // "" for any
	headers   []valueMatch
	query     []valueMatch
}

// hasRegex reports whether some part of the match is a regular expression: no example
// request is made up from such a match.
func (m routeMatch) hasRegex() bool {
	has := func(v valueMatch) bool { return v.regex != nil }
	return m.path == pathRegex || slices.ContainsFunc(m.headers, has) || slices.ContainsFunc(m.query, has)
}

// newRouteMatch applies the CRD defaults to m: PathPrefix "/", Exact headers and query
// params. A regex that does not compile (the rule is refused, consullimits) matches
// nothing.
func newRouteMatch(m gatewayv1.HTTPRouteMatch) routeMatch {
	out := routeMatch{path: pathPrefix, pathValue: "/"}
	if m.Path != nil && m.Path.Value != nil {
		out.pathValue = *m.Path.Value
	}
	if m.Path != nil && m.Path.Type != nil {
		switch *m.Path.Type {
		case gatewayv1.PathMatchExact:
			out.path = pathExact
		case gatewayv1.PathMatchRegularExpression:
			out.path, out.pathRegex = pathRegex, fullMatch(out.pathValue)
		}
	}
	if m.Method != nil {
		out.method = string(*m.Method)
	}
	for _, h := range m.Headers {
		regex := h.Type != nil && *h.Type == gatewayv1.HeaderMatchRegularExpression
		out.headers = append(out.headers, newValueMatch(strings.ToLower(string(h.Name)), h.Value, regex))
	}
	for _, q := range m.QueryParams {
		regex := q.Type != nil && *q.Type == gatewayv1.QueryParamMatchRegularExpression
		out.query = append(out.query, newValueMatch(string(q.Name), q.Value, regex))
	}
	return out
}

func newValueMatch(name, value string, regex bool) valueMatch {
	v := valueMatch{name: name, value: value}
	if regex {
		v.regex = fullMatch(value)
	}
	return v
}

// neverMatches is the regex of a value that does not compile.
var neverMatches = regexp.MustCompile(`[^\x00-\x{10FFFF}]`)

// fullMatch compiles an RE2 regex that must match the whole value, as Envoy's
// safe_regex does.
func fullMatch(expr string) *regexp.Regexp {
	re, err := regexp.Compile(`^(?:` + expr + `)$`)
	if err != nil {
		return neverMatches
	}
	return re
}

// exampleRequest is a concrete request, as a user would send it.
type exampleRequest struct {
	method  string // "" is GET
	host    string
	path    string
	headers map[string]string
	query   map[string]string
	// withheld are the parts taken from the match of a route of another namespace
	// than the route judged ("path", "header:NAME", "query:NAME"): a message shows
	// them withheld (shown).
	withheld map[string]bool
}

func (r exampleRequest) String() string {
	var b strings.Builder
	b.WriteString(cmp.Or(r.method, "GET") + " " + r.host + r.path)
	sep := "?"
	for _, name := range sortedKeys(r.query) {
		b.WriteString(sep + name + "=" + r.query[name])
		sep = "&"
	}
	for _, name := range sortedKeys(r.headers) {
		fmt.Fprintf(&b, " (%s: %s)", name, r.headers[name])
	}
	return b.String()
}

// shown is the request as a message shows it to the judged route's author: the
// values of another namespace's route are withheld, its path as "/...", its header
// and query params only counted.
func (r exampleRequest) shown() string {
	if len(r.withheld) == 0 {
		return r.String()
	}
	var b strings.Builder
	path := r.path
	if r.withheld["path"] {
		path = "/..."
	}
	b.WriteString(cmp.Or(r.method, "GET") + " " + r.host + path)
	sep := "?"
	for _, name := range sortedKeys(r.query) {
		if !r.withheld["query:"+name] {
			b.WriteString(sep + name + "=" + r.query[name])
			sep = "&"
		}
	}
	for _, name := range sortedKeys(r.headers) {
		if !r.withheld["header:"+name] {
			fmt.Fprintf(&b, " (%s: %s)", name, r.headers[name])
		}
	}
	if n := len(r.withheld) - btoi(r.withheld["path"]); n > 0 {
		fmt.Fprintf(&b, " with %d header or query %s of another namespace's route", n, plural(n, "value", "values"))
	}
	return b.String()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// matchesRest reports whether r satisfies the method, header and query conditions of
// m, which Gateway API and Consul read alike.
func (m routeMatch) matchesRest(r exampleRequest) bool {
	if m.method != "" && m.method != cmp.Or(r.method, "GET") {
		return false
	}
	for _, h := range m.headers {
		got, ok := r.headers[h.name]
		if !h.matches(got, ok) {
			return false
		}
	}
	for _, q := range m.query {
		got, ok := r.query[q.name]
		if !q.matches(got, ok) {
			return false
		}
	}
	return true
}

// specMatches reports whether Gateway API's match m selects r: PathPrefix matches
// whole path segments.
func (m routeMatch) specMatches(r exampleRequest) bool {
	switch m.path {
	case pathExact:
		if r.path != m.pathValue {
			return false
		}
	case pathRegex:
		if !m.pathRegex.MatchString(r.path) {
			return false
		}
	default:
		if !segmentPrefix(r.path, m.pathValue) {
			return false
		}
	}
	return m.matchesRest(r)
}

// segmentPrefix reports whether path starts with prefix element by element.
func segmentPrefix(path, prefix string) bool {
	prefix = strings.TrimSuffix(prefix, "/")
	return prefix == "" || path == prefix || strings.HasPrefix(path, prefix+"/")
}

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
