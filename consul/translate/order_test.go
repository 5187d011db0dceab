package translate

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	gwdecision "github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

func exactMatch(path string) gatewayv1.HTTPRouteMatch {
	return gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: new(gatewayv1.PathMatchExact), Value: new(path)}}
}

func ruleTo(backend string, matches ...gatewayv1.HTTPRouteMatch) gatewayv1.HTTPRouteRule {
	return gatewayv1.HTTPRouteRule{Matches: matches, BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", backend, 8080, nil)}}
}

// TestExactBeatsPathPrefixOfTheSamePath: an Exact match wins over a PathPrefix of
// the same path in the same route, whichever rule the route lists first.
func TestExactBeatsPathPrefixOfTheSamePath(t *testing.T) {
	tests := []struct {
		name    string
		rules   []gatewayv1.HTTPRouteRule
		dropped []int
		want    map[string]string
	}{
		{
			name:  "PathPrefix /foo, then Exact /foo",
			rules: []gatewayv1.HTTPRouteRule{ruleTo("web", prefixMatch("/foo")), ruleTo("api", exactMatch("/foo"))},
			want:  map[string]string{"/foo": "api=1 /foo", "/foo/": "web=1 /foo/", "/foo/x": "web=1 /foo/x", "/foox": ""},
		},
		{
			name:  "PathPrefix /foo, then Exact /foo/",
			rules: []gatewayv1.HTTPRouteRule{ruleTo("web", prefixMatch("/foo")), ruleTo("api", exactMatch("/foo/"))},
			want:  map[string]string{"/foo/": "api=1 /foo/", "/foo": "web=1 /foo", "/foo/x": "web=1 /foo/x"},
		},
		{
			name:  "every request, then Exact /",
			rules: []gatewayv1.HTTPRouteRule{ruleTo("web"), ruleTo("api", exactMatch("/"))},
			want:  map[string]string{"/": "api=1 /", "/x": "web=1 /x"},
		},
		{
			name:  "Exact /foo first already",
			rules: []gatewayv1.HTTPRouteRule{ruleTo("api", exactMatch("/foo")), ruleTo("web", prefixMatch("/foo"))},
			want:  map[string]string{"/foo": "api=1 /foo", "/foo/x": "web=1 /foo/x"},
		},
		{
			name:  "both in one rule",
			rules: []gatewayv1.HTTPRouteRule{ruleTo("web", prefixMatch("/foo"), prefixMatch("/bar")), ruleTo("api", exactMatch("/bar"), exactMatch("/foo"))},
			want:  map[string]string{"/foo": "api=1 /foo", "/bar": "api=1 /bar", "/foo/x": "web=1 /foo/x", "/bar/x": "web=1 /bar/x"},
		},
		{
			name: "a refused Exact rule",
			rules: []gatewayv1.HTTPRouteRule{ruleTo("web", prefixMatch("/foo")), func() gatewayv1.HTTPRouteRule {
				r := ruleTo("api", exactMatch("/foo"))
				r.Filters = []gatewayv1.HTTPRouteFilter{extensionRef}
				return r
			}()},
			dropped: []int{1},
			want:    map[string]string{"/foo": "consul_gateway_controller_blackhole=1 /foo", "/foo/x": "web=1 /foo/x"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkRouting(t, translatedRoute(t, gwdecision.Route{DroppedRules: tt.dropped}, nil, tt.rules...), tt.want)
		})
	}
}

// TestExactFirstLeavesRulesWithoutTies: an entry where no written Exact follows a
// match it ties with is written as it was, rules unsplit.
func TestExactFirstLeavesRulesWithoutTies(t *testing.T) {
	exact := consulapi.HTTPMatch{Path: consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchExact, Value: "/foo"}}
	derived := exact
	derived.Headers = []consulapi.HTTPHeaderMatch{{Match: consulapi.HTTPHeaderMatchExact, Name: "x", Value: "1"}}
	subtree := consulapi.HTTPMatch{Path: consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchPrefix, Value: "/foo/"}}
	rules := []consulapi.HTTPRouteRule{
		// More headers than the Exact: Consul puts it first whatever the entry says.
		{Matches: []consulapi.HTTPMatch{derived, subtree}, Services: []consulapi.HTTPService{{Name: "web"}}},
		{Matches: []consulapi.HTTPMatch{exact}, Services: []consulapi.HTTPService{{Name: "api"}}},
	}
	got := exactFirst(rules, [][]consulapi.HTTPMatch{nil, {exact}})
	if diff := gocmp.Diff(rules, got); diff != "" {
		t.Errorf("rules changed (-want +got):\n%s", diff)
	}
}

// TestExactFirstChangesNoOtherPrecedence: on random entries, the order Consul makes
// of the result is the order it made of the input with, in each tie, the written
// Exact matches first; every match keeps its filters and services.
func TestExactFirstChangesNoOtherPrecedence(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 1))
	for n := range 3000 {
		rules, exacts := randomEntryRules(rng)
		got := exactFirst(rules, exacts)
		want := consulOrder(flattenMatches(rules, exacts))
		for _, group := range tiesOf(want) {
			members := make([]entryMatch, 0, len(group))
			for _, p := range group {
				members = append(members, want[p])
			}
			// Written Exact first; SortStableFunc keeps each side's order.
			slices.SortStableFunc(members, func(a, b entryMatch) int {
				if a.exact == b.exact {
					return 0
				}
				if a.exact {
					return -1
				}
				return 1
			})
			for i, p := range group {
				want[p] = members[i]
			}
		}
		if diff := gocmp.Diff(routesOf(rules, want), routesOf(got, consulOrder(flattenMatches(got, make([][]consulapi.HTTPMatch, len(got)))))); diff != "" {
			t.Fatalf("case %d: %+v with exacts %+v: Consul's order (-want +got):\n%s", n, rules, exacts, diff)
		}
	}
}

// consulOrder sorts matches as Consul 1.15 does (discoverychain.compareHTTPRules,
// sort.SliceStable).
func consulOrder(flat []entryMatch) []entryMatch {
	slices.SortStableFunc(flat, func(a, b entryMatch) int {
		return cmp.Or(
			cmp.Compare(len(b.match.Path.Value), len(a.match.Path.Value)),
			cmp.Compare(len(b.match.Headers), len(a.match.Headers)),
			cmp.Compare(len(b.match.Query), len(a.match.Query)),
		)
	})
	return flat
}

// tiesOf are the positions of each tie's matches in flat.
func tiesOf(flat []entryMatch) [][]int {
	positions := map[tie][]int{}
	for i, m := range flat {
		if m.match.Path.Match != consulapi.HTTPPathMatchRegularExpression {
			k := tie{m.match.Path.Value, len(m.match.Headers), len(m.match.Query)}
			positions[k] = append(positions[k], i)
		}
	}
	var out [][]int
	for _, p := range positions {
		out = append(out, p)
	}
	return out
}

// consulRoute is one of Consul's routes: a match and where it sends requests.
type consulRoute struct {
	Match    consulapi.HTTPMatch
	Services []consulapi.HTTPService
}

func routesOf(rules []consulapi.HTTPRouteRule, flat []entryMatch) []consulRoute {
	out := make([]consulRoute, 0, len(flat))
	for _, m := range flat {
		out = append(out, consulRoute{m.match, rules[m.rule].Services})
	}
	return out
}

// randomEntryRules are up to five rules of up to three matches from a few paths,
// headers and query parameters, each rule with a service of its own, and the Exact
// matches each writes (some of its exact matches).
func randomEntryRules(rng *rand.Rand) ([]consulapi.HTTPRouteRule, [][]consulapi.HTTPMatch) {
	paths := []string{"/", "/a", "/a/", "/b"}
	types := []consulapi.HTTPPathMatchType{consulapi.HTTPPathMatchExact, consulapi.HTTPPathMatchPrefix, consulapi.HTTPPathMatchRegularExpression}
	var rules []consulapi.HTTPRouteRule
	var exacts [][]consulapi.HTTPMatch
	for i := range 1 + rng.IntN(5) {
		rule := consulapi.HTTPRouteRule{Services: []consulapi.HTTPService{{Name: fmt.Sprintf("s%d", i)}}}
		var written []consulapi.HTTPMatch
		for range rng.IntN(4) {
			m := consulapi.HTTPMatch{Path: consulapi.HTTPPathMatch{Match: types[rng.IntN(len(types))], Value: paths[rng.IntN(len(paths))]}}
			for h := range rng.IntN(2) {
				m.Headers = append(m.Headers, consulapi.HTTPHeaderMatch{Match: consulapi.HTTPHeaderMatchExact, Name: fmt.Sprintf("h%d", h), Value: "v"})
			}
			if rng.IntN(3) == 0 {
				m.Query = []consulapi.HTTPQueryMatch{{Match: consulapi.HTTPQueryMatchExact, Name: "q", Value: "v"}}
			}
			if m.Path.Match == consulapi.HTTPPathMatchExact && rng.IntN(2) == 0 {
				written = append(written, m)
			}
			rule.Matches = append(rule.Matches, m)
		}
		rules = append(rules, rule)
		exacts = append(exacts, written)
	}
	return rules, exacts
}
