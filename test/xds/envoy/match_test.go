package envoy

import (
	"maps"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func toCluster(name string) *routev3.Route_Route {
	return &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: name}}}
}

func prefixRoute(prefix, cluster string) *routev3.Route {
	return &routev3.Route{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: prefix}}, Action: toCluster(cluster)}
}

// routes is a route configuration that exercises every part of Route.
func routes() *routev3.RouteConfiguration {
	header := func(key, value string, appendValue bool) *corev3.HeaderValueOption {
		return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: key, Value: value}, Append: wrapperspb.Bool(appendValue)} //nolint:staticcheck // what Consul 1.15 sends
	}
	return &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{
		{Name: "any", Domains: []string{"*"}, Routes: []*routev3.Route{prefixRoute("/", "any")}},
		{Name: "wildcard", Domains: []string{"*.example.com"}, Routes: []*routev3.Route{prefixRoute("/", "wildcard")}},
		{Name: "exact", Domains: []string{"www.example.com", "www.example.com:80"}, Routes: []*routev3.Route{
			{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/exact"}}, Action: toCluster("exact")},
			{Match: &routev3.RouteMatch{
				PathSpecifier: &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "/r/[0-9]+"}},
			}, Action: toCluster("regex")},
			{Match: &routev3.RouteMatch{
				PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/h/"},
				Headers: []*routev3.HeaderMatcher{
					{Name: ":method", HeaderMatchSpecifier: &routev3.HeaderMatcher_SafeRegexMatch{SafeRegexMatch: &matcherv3.RegexMatcher{Regex: "POST"}}}, //nolint:staticcheck // as above
					{Name: "x-skip", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}, InvertMatch: true},
				},
				QueryParameters: []*routev3.QueryParameterMatcher{{Name: "q", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{
					StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "1"}},
				}}},
			}, Action: toCluster("post")},
			{
				Match:                  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/old"}},
				RequestHeadersToAdd:    []*corev3.HeaderValueOption{header("x-set", "new", false), header("x-add", "more", true)},
				RequestHeadersToRemove: []string{"x-gone", "x-set"},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{
					PrefixRewrite: "/new",
					ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{Clusters: []*routev3.WeightedCluster_ClusterWeight{
						{Name: "a", Weight: wrapperspb.UInt32(30)}, {Name: "b", Weight: wrapperspb.UInt32(70)},
					}}},
				}},
			},
		}},
	}}
}

func TestRoute(t *testing.T) {
	tests := []struct {
		req      Request
		clusters map[string]uint32 // nil: no route
		path     string
		headers  map[string]string
	}{
		// Virtual hosts: exact domain, then suffix wildcard, then "*"; the port counts.
		{req: Request{Host: "www.example.com", Target: "/nothing"}},
		{req: Request{Host: "WWW.example.com:80", Target: "/exact"}, clusters: map[string]uint32{"exact": 1}},
		{req: Request{Host: "www.example.com:8080", Target: "/exact"}, clusters: map[string]uint32{"any": 1}},
		{req: Request{Host: "api.example.com", Target: "/exact"}, clusters: map[string]uint32{"wildcard": 1}},
		{req: Request{Host: "example.com", Target: "/exact"}, clusters: map[string]uint32{"any": 1}},
		// Paths: exact is whole, regex is anchored, prefix is a plain string prefix.
		{req: Request{Host: "www.example.com", Target: "/exact/"}},
		{req: Request{Host: "www.example.com", Target: "/exact?x=1"}, clusters: map[string]uint32{"exact": 1}},
		{req: Request{Host: "www.example.com", Target: "/r/12"}, clusters: map[string]uint32{"regex": 1}},
		{req: Request{Host: "www.example.com", Target: "/r/12/x"}},
		{req: Request{Host: "www.example.com", Target: "/oldest"}, clusters: map[string]uint32{"a": 30, "b": 70}, path: "/newest"},
		// Method, an inverted presence match and a query parameter, all needed.
		{req: Request{Method: "POST", Host: "www.example.com", Target: "/h/1?q=1"}, clusters: map[string]uint32{"post": 1}},
		{req: Request{Method: "GET", Host: "www.example.com", Target: "/h/1?q=1"}},
		{req: Request{Method: "POST", Host: "www.example.com", Target: "/h/1?q=2"}},
		{req: Request{Method: "POST", Host: "www.example.com", Target: "/h/1?q=1", Headers: map[string]string{"X-Skip": "y"}}},
		// Removals before additions; "append" adds to a value, otherwise it is replaced.
		{
			req:      Request{Host: "www.example.com", Target: "/old/x", Headers: map[string]string{"x-set": "old", "x-add": "one", "x-gone": "1", "x-kept": "k"}},
			clusters: map[string]uint32{"a": 30, "b": 70}, path: "/new/x",
			headers: map[string]string{"x-set": "new", "x-add": "one,more", "x-gone": "", "x-kept": "k"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.req.String(), func(t *testing.T) {
			got, ok, err := Route(routes(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if ok != (tt.clusters != nil) {
				t.Fatalf("routed %v (%v), want %v", ok, got.Clusters, tt.clusters)
			}
			if !ok {
				return
			}
			if !maps.Equal(got.Clusters, tt.clusters) {
				t.Errorf("clusters %v, want %v", got.Clusters, tt.clusters)
			}
			want := tt.path
			if want == "" {
				want, _, _ = strings.Cut(tt.req.Target, "?")
			}
			if got.Path != want {
				t.Errorf("path %q, want %q", got.Path, want)
			}
			for k, v := range tt.headers {
				if got.Headers[k] != v {
					t.Errorf("header %s = %q, want %q", k, got.Headers[k], v)
				}
			}
		})
	}
}

func TestRouteRefusesWhatItDoesNotUnderstand(t *testing.T) {
	rc := &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{{Domains: []string{"*"}, Routes: []*routev3.Route{
		{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}, Action: &routev3.Route_Redirect{Redirect: &routev3.RedirectAction{}}},
	}}}}
	if _, _, err := Route(rc, Request{Host: "x", Target: "/"}); err == nil {
		t.Error("a redirect action was taken for a route")
	}
}

func TestNormalizeScrubs(t *testing.T) {
	c := &Config{Routes: map[string]*routev3.RouteConfiguration{"80": {
		Name: "80",
		VirtualHosts: []*routev3.VirtualHost{
			{Name: "b", Domains: []string{"10.0.0.7"}, Routes: []*routev3.Route{prefixRoute("/", "web.default.dc1.internal.0b7e5c39-75e1-4d1a-8a6c-1c2f5d0e9a11.consul")}},
			{Name: "a", Domains: []string{"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"}},
		},
	}}}
	got, err := Normalize(c, map[string]string{"10.0.0.7": "POD-IP"})
	if err != nil {
		t.Fatal(err)
	}
	s := string(got)
	for _, want := range []string{"web.default.dc1.internal.TRUST-DOMAIN.consul", "<PEM CERTIFICATE>", "POD-IP"} {
		if !strings.Contains(s, want) {
			t.Errorf("normalized output lacks %q:\n%s", want, s)
		}
	}
	if strings.Index(s, `"name": "a"`) > strings.Index(s, `"name": "b"`) {
		t.Errorf("virtual hosts not sorted by name:\n%s", s)
	}
}

// The corners where a naive reading of the protos and Envoy part ways (Envoy's
// HeaderUtility::matchHeaders and Http::Utility::parseQueryString).
func TestHeaderMatchCorners(t *testing.T) {
	exact := func(v string) *routev3.HeaderMatcher {
		return &routev3.HeaderMatcher{Name: "x-v", HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: v}} //nolint:staticcheck // what Consul 1.15 sends
	}
	inverted := func(h *routev3.HeaderMatcher) *routev3.HeaderMatcher { h.InvertMatch = true; return h }
	present := func(p bool) *routev3.HeaderMatcher {
		return &routev3.HeaderMatcher{Name: "x-v", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: p}}
	}
	stringExact := &routev3.HeaderMatcher{Name: "x-v", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
		StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: ""}},
	}}
	missingAsEmpty := inverted(exact("a"))
	missingAsEmpty.TreatMissingHeaderAsEmpty = true
	tests := []struct {
		name    string
		matcher *routev3.HeaderMatcher
		headers map[string][]string
		want    bool
	}{
		{"an inverted exact match on a missing header does not match", inverted(exact("a")), nil, false},
		{"an inverted exact match on another value matches", inverted(exact("a")), map[string][]string{"x-v": {"b"}}, true},
		{"an exact match on a missing header does not match", exact("a"), nil, false},
		{"an inverted absence matches a present header", inverted(present(false)), map[string][]string{"x-v": {"b"}}, true},
		{"an inverted presence matches a missing header", inverted(present(true)), nil, true},
		{"an inverted absence does not match a missing header", inverted(present(false)), nil, false},
		{"absence matches a missing header", present(false), nil, true},
		{"no specifier is presence: inverted, it matches a missing header", inverted(&routev3.HeaderMatcher{Name: "x-v"}), nil, true},
		{"an empty exact_match matches any value", exact(""), map[string][]string{"x-v": {"anything"}}, true},
		{"an empty exact_match does not match a missing header", exact(""), nil, false},
		{"an empty string_match exact matches only the empty value", stringExact, map[string][]string{"x-v": {"anything"}}, false},
		{"an empty string_match exact matches the empty value", stringExact, map[string][]string{"x-v": {""}}, true},
		{"a missing header treated as empty is matched as empty, then inverted", missingAsEmpty, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := headerMatches(tt.matcher, tt.headers)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("matches %v, want %v", got, tt.want)
			}
		})
	}
}

func TestQueryIsMatchedAsSent(t *testing.T) {
	tests := []struct {
		query string
		want  map[string]string
	}{
		{"a=1&a=2", map[string]string{"a": "1"}},
		{"a%20b=c%20d&e=f+g", map[string]string{"a%20b": "c%20d", "e": "f+g"}},
		{"flag&x=", map[string]string{"flag": "", "x": ""}},
		{"bad=%zz", map[string]string{"bad": "%zz"}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			if got := parseQuery(tt.query); !maps.Equal(got, tt.want) {
				t.Errorf("parsed %v, want %v", got, tt.want)
			}
		})
	}
}
