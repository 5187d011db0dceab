package envoy

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/google/go-cmp/cmp"
)

// mutations is a route configuration with header mutations at every level: "x-level" is
// overwritten by each, "x-trace" appended to by each, as the weighted cluster picked.
func mutations(mostSpecificWins bool) *routev3.RouteConfiguration {
	level := func(name string) ([]*corev3.HeaderValueOption, []*corev3.HeaderValueOption) {
		return []*corev3.HeaderValueOption{header("x-level", name, false), header("x-trace", name, true)},
			[]*corev3.HeaderValueOption{header("x-resp-level", name, false), header("x-resp-trace", name, true)}
	}
	a, b := weight("a", 1), weight("b", 1)
	a.RequestHeadersToAdd, a.ResponseHeadersToAdd = level("a")
	a.HostRewriteSpecifier = &routev3.WeightedCluster_ClusterWeight_HostRewriteLiteral{HostRewriteLiteral: "a.internal"}
	a.RequestHeadersToRemove, a.ResponseHeadersToRemove = []string{"x-gone"}, []string{"Server"}
	b.RequestHeadersToAdd, b.ResponseHeadersToAdd = level("b")
	r := &routev3.Route{Match: prefixRoute("/", "").GetMatch(), Action: weighted(a, b)}
	r.RequestHeadersToAdd, r.ResponseHeadersToAdd = level("route")
	vh := vhost("vh", []string{"*"}, r)
	vh.RequestHeadersToAdd, vh.ResponseHeadersToAdd = level("vh")
	rc := &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{vh}, MostSpecificHeaderMutationsWins: mostSpecificWins}
	rc.RequestHeadersToAdd, rc.ResponseHeadersToAdd = level("rc")
	return rc
}

// Per the WeightedCluster.ClusterWeight documentation, a weighted cluster's mutations
// apply before the route's, the virtual host's and the route configuration's; by
// default the least specific level is applied last and wins.
func TestServeHTTPHeaderMutations(t *testing.T) {
	type want struct {
		host      string
		level     []string
		trace     []string
		respLevel []string
		respTrace []string
		removed   []string
	}
	tests := []struct {
		name             string
		mostSpecificWins bool
		cluster          string
		want             want
	}{
		{"cluster a", false, "a", want{"a.internal", []string{"rc"}, []string{"0", "a", "route", "vh", "rc"}, []string{"rc"}, []string{"a", "route", "vh", "rc"}, []string{"server"}}},
		{"cluster b", false, "b", want{"app.example.com", []string{"rc"}, []string{"0", "b", "route", "vh", "rc"}, []string{"rc"}, []string{"b", "route", "vh", "rc"}, nil}},
		{"most specific wins", true, "a", want{"a.internal", []string{"route"}, []string{"0", "a", "rc", "vh", "route"}, []string{"route"}, []string{"a", "rc", "vh", "route"}, []string{"server"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := httpConfig(t, mutations(tt.mostSpecificWins), "a", "b")
			rnd := seeded()
			var got HTTPAnswer
			for range 100 {
				var err error
				got, err = ServeHTTP(c, HTTPRequest{Port: 80, Host: "app.example.com", Target: "/", Headers: map[string][]string{
					"X-Trace": {"0"}, "X-Gone": {"1"},
				}}, rnd)
				if err != nil {
					t.Fatal(err)
				}
				if got.Cluster == tt.cluster {
					break
				}
			}
			if got.Cluster != tt.cluster {
				t.Fatalf("cluster %s never picked", tt.cluster)
			}
			gone := []string(nil)
			if tt.cluster == "b" {
				gone = []string{"1"}
			}
			diff := cmp.Diff(tt.want, want{
				host: got.Host, level: got.Headers["x-level"], trace: got.Headers["x-trace"],
				respLevel: got.ResponseHeaders["x-resp-level"], respTrace: got.ResponseHeaders["x-resp-trace"],
				removed: got.RemovedResponseHeaders,
			}, cmp.AllowUnexported(want{}))
			if diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if !cmp.Equal(got.Headers["x-gone"], gone) {
				t.Errorf("x-gone %v, want %v", got.Headers["x-gone"], gone)
			}
		})
	}
}

// Within one level, HeaderParser applies removals, then overwrites, then appends; an
// empty value is dropped unless keep_empty_value.
func TestHeaderOpsWithinALevel(t *testing.T) {
	headers := map[string][]string{"x-a": {"0"}, "x-b": {"0"}, "x-c": {"0"}}
	ops := headerOps{
		add: []*corev3.HeaderValueOption{
			header("x-a", "appended", true), header("x-a", "overwritten", false),
			header("x-b", "", false),
			{Header: &corev3.HeaderValue{Key: "x-c", Value: "if-absent"}, AppendAction: corev3.HeaderValueOption_ADD_IF_ABSENT},
			{Header: &corev3.HeaderValue{Key: "x-d", Value: "if-absent"}, AppendAction: corev3.HeaderValueOption_ADD_IF_ABSENT},
			{Header: &corev3.HeaderValue{Key: "x-e", Value: ""}, KeepEmptyValue: true},
			header("x-f", "100%% sure", false),
		},
		remove: []string{"X-C"},
	}
	if _, err := ops.apply(headers); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"x-a": {"overwritten", "appended"}, "x-b": {"0"}, "x-c": {"if-absent"}, "x-d": {"if-absent"}, "x-e": {""}, "x-f": {"100% sure"}}
	if diff := cmp.Diff(want, headers); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// Rewrites keep the query; x-envoy-original-path records the path before.
func TestServeHTTPRewrites(t *testing.T) {
	prefix := prefixRoute("/old", "a")
	prefix.GetRoute().PrefixRewrite = "/new"
	regex := &routev3.Route{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/v"}}, Action: toCluster("a")}
	regex.GetRoute().RegexRewrite = &matcherv3.RegexMatchAndSubstitute{Pattern: &matcherv3.RegexMatcher{Regex: "^/v([0-9]+)/(.*)$"}, Substitution: `/\2/version/\1`}
	c := httpConfig(t, &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{vhost("a", []string{"*"}, prefix, regex)}}, "a")
	tests := []struct{ target, path string }{
		{"/old/page?q=1", "/new/page?q=1"},
		{"/oldest", "/newest"},
		{"/v2/items?x", "/items/version/2?x"},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			got, err := ServeHTTP(c, HTTPRequest{Port: 80, Host: "x", Target: tt.target}, seeded())
			if err != nil {
				t.Fatal(err)
			}
			if got.Path != tt.path || !cmp.Equal(got.Headers["x-envoy-original-path"], []string{tt.target}) {
				t.Errorf("path %q (original %v), want %q (original %q)", got.Path, got.Headers["x-envoy-original-path"], tt.path, tt.target)
			}
		})
	}
}

// Weighted clusters are picked in proportion to their weights; a weight of 0 is never
// picked.
func TestServeHTTPWeightedPick(t *testing.T) {
	r := &routev3.Route{Match: prefixRoute("/", "").GetMatch(), Action: weighted(weight("a", 30), weight("b", 70), weight("never", 0))}
	c := httpConfig(t, &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{vhost("a", []string{"*"}, r)}}, "a", "b", "never")
	rnd := seeded()
	const n = 10000
	count := map[string]int{}
	for range n {
		got, err := ServeHTTP(c, HTTPRequest{Port: 80, Host: "x", Target: "/"}, rnd)
		if err != nil {
			t.Fatal(err)
		}
		count[got.Cluster]++
	}
	if count["never"] > 0 || count["a"] < n*28/100 || count["a"] > n*32/100 || count["a"]+count["b"] != n {
		t.Errorf("picks %v of %d, want about 30%% a and 70%% b", count, n)
	}
}
