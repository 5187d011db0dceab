package sync

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// This file makes up the example requests the conflicts are looked for with.

// maxExampleRequests bounds the requests tried for one route on one listener, so a
// listener with thousands of routes keeps its syncs short; past it, conflicts may go
// unreported.
const maxExampleRequests = 2048

// exampleSet collects distinct example requests, up to maxExampleRequests.
type exampleSet struct {
	seen map[string]int // the index in list of each request's String
	list []exampleRequest
}

// add adds r unless the set holds it already; then a part stays withheld only if
// it is withheld in both: a request the judged route's namespace makes up too shows
// nothing the author does not know.
func (s *exampleSet) add(r exampleRequest) {
	key := r.String()
	if i, ok := s.seen[key]; ok {
		s.list[i].withheld = withheldInBoth(s.list[i].withheld, r.withheld)
		return
	}
	if len(s.list) >= maxExampleRequests {
		return
	}
	s.seen[key] = len(s.list)
	s.list = append(s.list, r)
}

func withheldInBoth(a, b map[string]bool) map[string]bool {
	var out map[string]bool
	for part := range a {
		if b[part] {
			if out == nil {
				out = map[string]bool{}
			}
			out[part] = true
		}
	}
	return out
}

// exampleRequests makes up the requests that may show a conflict for route ri: for
// each of its matches (but those with a regex), requests it selects, alone and
// together with each match of every route of the listener (the same path, method,
// headers and query params where they can agree), at its own hosts and at the hosts
// of the other routes' virtual hosts it also serves. What a request takes from the
// match of a route of another namespace is marked withheld.
func (t *listenerTable) exampleRequests(ri int) []exampleRequest {
	route := t.routes[ri]
	own := exampleHosts(route.hostnames)
	everywhere := slices.Clone(own)
	for _, other := range t.routes {
		everywhere = append(everywhere, reachableHosts(route.hostnames, other.consulHosts)...)
	}
	set := exampleSet{seen: map[string]int{}}
	for _, matches := range route.rules {
		for _, m := range matches {
			if m.hasRegex() {
				continue
			}
			for _, r := range ownRequests(m) {
				addAt(&set, r, everywhere)
			}
			for _, other := range t.routes {
				hosts := append(slices.Clone(own), reachableHosts(route.hostnames, other.consulHosts)...)
				foreign := other.key.Namespace != route.key.Namespace
				for _, otherMatches := range other.rules {
					for _, o := range otherMatches {
						addBoth(&set, m, o, hosts, foreign)
					}
				}
			}
		}
	}
	return set.list
}

// addBoth adds, at hosts, the requests of requestsOf(m, other) that other selects
// too: only those can show the two matches competing. foreign says other is of a
// route of another namespace: what the requests take from it is withheld.
func addBoth(set *exampleSet, m, other routeMatch, hosts []string, foreign bool) {
	for _, r := range requestsOf(m, other) {
		if !other.specMatches(r) {
			continue
		}
		if foreign {
			r.withheld = borrowedParts(m, r)
		}
		addAt(set, r, hosts)
	}
}

// borrowedParts are the parts of r, a request of requestsOf(m, other), that m does
// not give: its path, when m does not make it up alone, and the header and query
// params m has no condition on.
func borrowedParts(m routeMatch, r exampleRequest) map[string]bool {
	parts := map[string]bool{}
	if !slices.Contains(examplePaths(m), r.path) {
		parts["path"] = true
	}
	for name := range r.headers {
		if !slices.ContainsFunc(m.headers, func(v valueMatch) bool { return v.name == name }) {
			parts["header:"+name] = true
		}
	}
	for name := range r.query {
		if !slices.ContainsFunc(m.query, func(v valueMatch) bool { return v.name == name }) {
			parts["query:"+name] = true
		}
	}
	if len(parts) == 0 {
		return nil
	}
	return parts
}

func addAt(set *exampleSet, r exampleRequest, hosts []string) {
	for _, h := range hosts {
		r.host = h
		set.add(r)
	}
}

// exampleHost is a host a hostname serves: a wildcard's labels become "any".
func exampleHost(hostname string) string {
	if hostname == anyHost {
		return "any-host.example"
	}
	if suffix, ok := strings.CutPrefix(hostname, "*"); ok {
		return "any" + suffix
	}
	return hostname
}

func exampleHosts(hostnames []string) []string {
	out := make([]string, 0, len(hostnames))
	for _, h := range hostnames {
		out = append(out, exampleHost(h))
	}
	return out
}

// reachableHosts are the example hosts of keys that hostnames serve too.
func reachableHosts(hostnames, keys []string) []string {
	var out []string
	for _, k := range keys {
		h := exampleHost(k)
		if _, ok := specHostRank(hostnames, h); ok {
			out = append(out, h)
		}
	}
	return out
}

// examplePaths are paths a match without a regex path selects: its exact path, or
// its prefix itself and a path below it.
func examplePaths(m routeMatch) []string {
	switch m.path {
	case pathExact:
		return []string{m.pathValue}
	case pathPrefix:
		prefix := strings.TrimSuffix(m.pathValue, "/")
		return []string{cmp.Or(prefix, "/"), prefix + "/x"}
	}
	return nil
}

// requestsOf makes up requests m selects that also meet as many of other's conditions
// as can agree with m's: other's paths that m selects too, its method and its exact
// header and query values. None when the two contradict each other (different
// methods, different values of a header).
func requestsOf(m, other routeMatch) []exampleRequest {
	method := m.method
	if other.method != "" {
		if method != "" && method != other.method {
			return nil
		}
		method = other.method
	}
	headers, ok := mergedValues(m.headers, other.headers)
	if !ok {
		return nil
	}
	query, ok := mergedValues(m.query, other.query)
	if !ok {
		return nil
	}
	paths := examplePaths(m)
	for _, p := range examplePaths(other) {
		if m.specMatches(exampleRequest{path: p, method: method, headers: headers, query: query}) && !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	return requestsAt(paths, method, headers, query)
}

// ownRequests are requests m, which has no regex, selects.
func ownRequests(m routeMatch) []exampleRequest {
	headers, _ := mergedValues(m.headers, nil)
	query, _ := mergedValues(m.query, nil)
	return requestsAt(examplePaths(m), m.method, headers, query)
}

func requestsAt(paths []string, method string, headers, query map[string]string) []exampleRequest {
	out := make([]exampleRequest, 0, len(paths))
	for _, p := range paths {
		out = append(out, exampleRequest{method: method, path: p, headers: headers, query: query})
	}
	return out
}

// mergedValues are the exact values of own (which has no regex), with those of other
// for names own does not have; ok is false when both give a name different exact
// values, or other has a regex for a name own does not have (no value is made up).
func mergedValues(own, other []valueMatch) (map[string]string, bool) {
	values := map[string]string{}
	for _, v := range own {
		values[v.name] = v.value
	}
	for _, v := range other {
		got, has := values[v.name]
		switch {
		case has && v.regex == nil && got != v.value:
			return nil, false
		case !has && v.regex != nil:
			return nil, false
		case !has:
			values[v.name] = v.value
		}
	}
	return values, true
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
