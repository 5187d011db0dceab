package translate

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"

	consulapi "github.com/hashicorp/consul/api"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	gwdecision "github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

// routed is where Envoy sends a request by the routes Consul 1.15 makes of an
// http-route entry: the services with their weights, and the path they receive.
type routed struct {
	services map[string]int
	path     string
}

func (r routed) String() string {
	names := make([]string, 0, len(r.services))
	for name, w := range r.services {
		names = append(names, fmt.Sprintf("%s=%d", name, w))
	}
	slices.Sort(names)
	return fmt.Sprintf("%s %s", strings.Join(names, ","), r.path)
}

// routePath routes a request path through entry the way Consul 1.15 and Envoy do, for
// entries whose matches are paths only: Consul makes one route per match and orders
// them by the length of the path value, keeping rule order on ties
// (discoverychain.compareHTTPRules, sort.SliceStable); Envoy takes the first route that
// matches, exact or as a plain string prefix, and swaps the matched value for the
// prefix rewrite: the single service's own, or else the rule's
// (gateway_httproute.go). ok is false when nothing matches (Envoy's 404).
func routePath(entry *consulapi.HTTPRouteConfigEntry, path string) (routed, bool) {
	type route struct {
		match consulapi.HTTPMatch
		rule  consulapi.HTTPRouteRule
	}
	var routes []route
	for _, rule := range entry.Rules {
		for _, m := range rule.Matches {
			routes = append(routes, route{m, rule})
		}
	}
	slices.SortStableFunc(routes, func(a, b route) int { return cmp.Compare(len(b.match.Path.Value), len(a.match.Path.Value)) })
	for _, r := range routes {
		v := r.match.Path.Value
		matched := (r.match.Path.Match == consulapi.HTTPPathMatchExact && path == v) ||
			(r.match.Path.Match == consulapi.HTTPPathMatchPrefix && strings.HasPrefix(path, v))
		if !matched {
			continue
		}
		out := routed{services: map[string]int{}, path: path}
		for _, s := range r.rule.Services {
			out.services[s.Name] += s.Weight
		}
		rewrite := r.rule.Filters.URLRewrite
		if len(r.rule.Services) == 1 && r.rule.Services[0].Filters.URLRewrite != nil {
			rewrite = r.rule.Services[0].Filters.URLRewrite
		}
		if rewrite != nil && rewrite.Path != "" {
			out.path = rewrite.Path + path[len(v):]
		}
		return out, true
	}
	return routed{}, false
}

// translatedRoute translates a route of apps on an HTTP listener and returns its entry.
func translatedRoute(t *testing.T, decision gwdecision.Route, edit func(*gatewayv1.HTTPRoute), rules ...gatewayv1.HTTPRouteRule) *consulapi.HTTPRouteConfigEntry {
	t.Helper()
	decision.Attachments = []gwdecision.Attachment{attachment("apps", "gw", "http")}
	route := newConfirmedHTTPRoute("apps", "r", nil, decision, rules...)
	if edit != nil {
		edit(route.Route)
	}
	d := Translate(snapshotOf(
		confirmedGateway("apps", "gw", true, validListener(httpListener("http", 80, ""))),
		route,
	), Naming{}, testOwnership, Options{})
	checkConsul115Validation(t, d)
	entry, _ := d.Entries[EntryKey{Kind: consulapi.HTTPRoute, Name: "r.apps"}].(*consulapi.HTTPRouteConfigEntry)
	if entry == nil {
		t.Fatalf("no http-route written; problems %v", d.Problems)
	}
	return entry
}

// checkRouting checks where each request path goes: a want of "" is no route at all.
func checkRouting(t *testing.T, entry *consulapi.HTTPRouteConfigEntry, want map[string]string) {
	t.Helper()
	for path, w := range want {
		got, ok := routePath(entry, path)
		switch {
		case w == "" && ok:
			t.Errorf("%s: routed to %s, want no route", path, got)
		case w != "" && (!ok || got.String() != w):
			t.Errorf("%s: routed to %q (matched %v), want %q", path, got, ok, w)
		}
	}
}

func rewriteRule(prefix, replacement string, backendLevel bool) gatewayv1.HTTPRouteRule {
	rewrite := gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{
		Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: new(replacement)},
	}}
	rule := gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{prefixMatch(prefix)}}
	if backendLevel {
		rule.BackendRefs = []gatewayv1.HTTPBackendRef{httpBackend("", "api", 8080, nil, rewrite)}
		return rule
	}
	rule.Filters = []gatewayv1.HTTPRouteFilter{rewrite}
	rule.BackendRefs = []gatewayv1.HTTPBackendRef{httpBackend("", "api", 8080, nil)}
	return rule
}

// TestReplacePrefixMatch: the table of Gateway API's HTTPPathModifier.ReplacePrefixMatch,
// through what Consul and Envoy make of the entry, on the rule and on its backend.
// The prefix keeps matching whole path segments.
func TestReplacePrefixMatch(t *testing.T) {
	tests := []struct {
		prefix, replacement string
		want                map[string]string // request path: "api <path>", or "" for no route
	}{
		{"/foo", "/xyz", map[string]string{"/foo/bar": "/xyz/bar", "/foo": "/xyz", "/foo/": "/xyz/", "/foobar": ""}},
		{"/foo", "/xyz/", map[string]string{"/foo/bar": "/xyz/bar", "/foo": "/xyz", "/foo/": "/xyz/"}},
		{"/foo/", "/xyz", map[string]string{"/foo/bar": "/xyz/bar", "/foo": "/xyz", "/foobar": ""}},
		{"/foo/", "/xyz/", map[string]string{"/foo/bar": "/xyz/bar", "/foo/": "/xyz/"}},
		{"/foo", "", map[string]string{"/foo/bar": "/bar", "/foo/": "/", "/foo": "/"}},
		{"/foo", "/", map[string]string{"/foo/bar": "/bar", "/foo/": "/", "/foo": "/"}},
		{"/", "/xyz", map[string]string{"/bar": "/xyz/bar", "/": "/xyz", "/bar/": "/xyz/bar/"}},
		{"/", "/", map[string]string{"/bar": "/bar", "/": "/"}},
		// The conformance suite's HTTPRouteRewritePath.
		{"/prefix/one", "/one", map[string]string{"/prefix/one/two": "/one/two"}},
		{"/strip-prefix", "/", map[string]string{"/strip-prefix/three": "/three", "/strip-prefix": "/"}},
	}
	for _, tt := range tests {
		for _, backendLevel := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s to %q, on the backend %v", tt.prefix, tt.replacement, backendLevel), func(t *testing.T) {
				entry := translatedRoute(t, gwdecision.Route{}, nil, rewriteRule(tt.prefix, tt.replacement, backendLevel))
				want := map[string]string{}
				for path, rewritten := range tt.want {
					if rewritten != "" {
						rewritten = "api=1 " + rewritten
					}
					want[path] = rewritten
				}
				checkRouting(t, entry, want)
			})
		}
	}
}

// extensionRef is a filter no Consul can apply.
var extensionRef = gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterExtensionRef, ExtensionRef: &gatewayv1.LocalObjectReference{Group: "auth.example.com", Kind: "Policy", Name: "admins"}}

// TestRefusedRequestsGetAnError: the requests of a rule Gateway API answers with an
// error go to the blackhole, never to the backend of a broader rule.
func TestRefusedRequestsGetAnError(t *testing.T) {
	const blackhole = "consul_gateway_controller_blackhole=1"
	root := gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "web", 8080, nil)}}
	rule := func(prefix string, filters []gatewayv1.HTTPRouteFilter, refs ...gatewayv1.HTTPBackendRef) gatewayv1.HTTPRouteRule {
		return gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{prefixMatch(prefix)}, Filters: filters, BackendRefs: refs}
	}
	entry := translatedRoute(t, unresolvedAt(gwdecision.Route{DroppedRules: []int{0, 1}}, gwdecision.BackendRefIndex{Rule: 2, Ref: 0}, gwdecision.BackendRefIndex{Rule: 3, Ref: 0}),
		func(r *gatewayv1.HTTPRoute) { r.Status.Parents = ourRouteStatus(false) },
		// Refused by the status pipeline: an auth filter Consul cannot apply.
		rule("/admin", []gatewayv1.HTTPRouteFilter{extensionRef}, httpBackend("", "admin", 8080, nil)),
		// Refused by the status pipeline: a request timeout Consul 1.15 cannot set.
		func() gatewayv1.HTTPRouteRule {
			r := rule("/slow", nil, httpBackend("", "api", 8080, nil))
			r.Timeouts = &gatewayv1.HTTPRouteTimeouts{Request: new(gatewayv1.Duration("1s"))}
			return r
		}(),
		// Every backend invalid: unresolved per the decision (ungranted, missing), all
		// weight 0, none at all.
		rule("/unresolved", nil, httpBackend("ungranted", "secret", 8080, nil)),
		rule("/missing", nil, httpBackend("", "gone", 8080, nil)),
		rule("/drained", nil, httpBackend("", "api", 8080, new(int32(0)))),
		rule("/nothing", nil),
		root,
	)
	checkRouting(t, entry, map[string]string{
		"/admin": blackhole + " /admin", "/admin/users": blackhole + " /admin/users", "/administrator": "web=1 /administrator",
		"/slow":       blackhole + " /slow",
		"/unresolved": blackhole + " /unresolved",
		"/missing/x":  blackhole + " /missing/x",
		"/drained":    blackhole + " /drained",
		"/nothing":    blackhole + " /nothing",
		"/":           "web=1 /",
	})
}

// TestInvalidBackendShare: an invalid backendRef's share of a rule's requests goes to
// the blackhole, not to the valid backends; and an unresolved backendRef disables no
// other, not even one in another namespace, which its ReferenceGrant allows
// (conformance HTTPRoutePartiallyInvalidViaInvalidReferenceGrant).
func TestInvalidBackendShare(t *testing.T) {
	entry := translatedRoute(t, unresolvedAt(gwdecision.Route{}, gwdecision.BackendRefIndex{Rule: 0, Ref: 1}, gwdecision.BackendRefIndex{Rule: 1, Ref: 0}),
		func(r *gatewayv1.HTTPRoute) { r.Status.Parents = ourRouteStatus(false) },
		gatewayv1.HTTPRouteRule{
			Matches:     []gatewayv1.HTTPRouteMatch{prefixMatch("/split")},
			BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "web", 8080, new(int32(3))), httpBackend("", "gone", 8080, new(int32(1))), httpBackend("", "api", 8080, new(int32(0)))},
		},
		gatewayv1.HTTPRouteRule{
			Matches:     []gatewayv1.HTTPRouteMatch{prefixMatch("/invalid")},
			BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("ungranted", "secret", 8080, nil)},
		},
		gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("granted", "shop", 8080, nil)}},
	)
	checkRouting(t, entry, map[string]string{
		"/split/x": "consul_gateway_controller_blackhole=1,web=3 /split/x",
		"/invalid": "consul_gateway_controller_blackhole=1 /invalid",
		"/":        "shop=1 /",
	})
}

// TestInvalidRegexNeverReachesConsul: Envoy refuses a gateway's whole route
// configuration over a regex RE2 cannot compile, so a rule with one, which the status
// pipeline refuses (PartiallyInvalid), is left out rather than sent to the blackhole
// with its matches; its status says why, so it needs no problem of its own.
func TestInvalidRegexNeverReachesConsul(t *testing.T) {
	lookahead := gatewayv1.HTTPRouteRule{
		Matches:     []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: new(gatewayv1.PathMatchRegularExpression), Value: new("/(?=admin).*")}}},
		BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "admin", 8080, nil)},
	}
	root := gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "web", 8080, nil)}}
	for _, c := range []struct {
		name     string
		decision gwdecision.Route
		problems int
	}{
		{"refused by the status pipeline", gwdecision.Route{DroppedRules: []int{0}}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.decision.Attachments = []gwdecision.Attachment{attachment("apps", "gw", "http")}
			d := Translate(snapshotOf(
				confirmedGateway("apps", "gw", true, validListener(httpListener("http", 80, ""))),
				newConfirmedHTTPRoute("apps", "r", nil, c.decision, lookahead, root),
			), Naming{}, testOwnership, Options{})
			entry, _ := d.Entries[EntryKey{Kind: consulapi.HTTPRoute, Name: "r.apps"}].(*consulapi.HTTPRouteConfigEntry)
			if entry == nil || len(entry.Rules) != 1 || entry.Rules[0].Matches[0].Path.Match == consulapi.HTTPPathMatchRegularExpression {
				t.Fatalf("http-route %+v, want only the root rule", entry)
			}
			if len(d.Problems) != c.problems {
				t.Errorf("problems %v, want %d", d.Problems, c.problems)
			}
		})
	}
}
