package sync

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
)

// unsupportedValue is the problem every refused rule carries.
func unsupportedValue(msg string) *ruleProblem {
	return &ruleProblem{Reason: gatewayv1.RouteReasonUnsupportedValue, Message: msg}
}

// pathMatch builds a match on path only.
func pathMatch(t gatewayv1.PathMatchType, value string) gatewayv1.HTTPRouteMatch {
	return gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: new(t), Value: new(value)}}
}

// httpBackend builds a backendRef to a local Service with the given filters.
func httpBackend(name string, weight int32, filters ...gatewayv1.HTTPRouteFilter) gatewayv1.HTTPBackendRef {
	return gatewayv1.HTTPBackendRef{
		BackendRef: gatewayv1.BackendRef{
			BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(name), Port: new(gatewayv1.PortNumber(80))},
			Weight:                 new(weight),
		},
		Filters: filters,
	}
}

func prefixRewrite(prefix string) gatewayv1.HTTPRouteFilter {
	return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{
		Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: new(prefix)},
	}}
}

func fullPathRewrite(path string) gatewayv1.HTTPRouteFilter {
	return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{
		Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.FullPathHTTPPathModifier, ReplaceFullPath: new(path)},
	}}
}

var (
	requestHeaders = gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier,
		RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "X-Env", Value: "prod"}}, Remove: []string{"X-Debug"}}}
	responseHeaders = gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterResponseHeaderModifier,
		ResponseHeaderModifier: &gatewayv1.HTTPHeaderFilter{Add: []gatewayv1.HTTPHeader{{Name: "X-Served-By", Value: "consul"}}}}
	mirror = gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestMirror,
		RequestMirror: &gatewayv1.HTTPRequestMirrorFilter{BackendRef: gatewayv1.BackendObjectReference{Name: "shadow"}}}
)

func TestHTTPRuleProblem(t *testing.T) {
	allCaps := consullimits.Capabilities{ResponseHeaderModifier: true, FullPathRewrite: true, HostnameRewrite: true, RequestTimeouts: true,
		RetryPolicy: true, SessionPersistence: true, SingleBackendURLRewrite: true, TCPWeightedBackends: true}

	tests := []struct {
		name  string
		index int
		rule  gatewayv1.HTTPRouteRule
		caps  consullimits.Capabilities
		want  *ruleProblem
	}{
		{name: "empty rule", rule: gatewayv1.HTTPRouteRule{}, caps: consullimits.Consul115},
		{
			name: "everything Consul 1.15 expresses",
			caps: consullimits.Consul115,
			rule: gatewayv1.HTTPRouteRule{
				Name: new(gatewayv1.SectionName("api")),
				Matches: []gatewayv1.HTTPRouteMatch{
					pathMatch(gatewayv1.PathMatchExact, "/healthz"),
					pathMatch(gatewayv1.PathMatchRegularExpression, "/v[0-9]+/.*"),
					{
						Path:        &gatewayv1.HTTPPathMatch{Type: new(gatewayv1.PathMatchPathPrefix), Value: new("/api")},
						Headers:     []gatewayv1.HTTPHeaderMatch{{Name: "X-A", Value: "1"}, {Type: new(gatewayv1.HeaderMatchRegularExpression), Name: "X-B", Value: "^b"}},
						QueryParams: []gatewayv1.HTTPQueryParamMatch{{Name: "q", Value: "1"}, {Type: new(gatewayv1.QueryParamMatchRegularExpression), Name: "r", Value: ".*"}},
						Method:      new(gatewayv1.HTTPMethodPatch),
					},
				},
				Filters:     []gatewayv1.HTTPRouteFilter{requestHeaders},
				BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("a", 90, requestHeaders), httpBackend("b", 10), httpBackend("c", 0)},
				Timeouts:    &gatewayv1.HTTPRouteTimeouts{},
			},
		},
		{
			name:  "unknown path match type",
			index: 3,
			caps:  consullimits.Consul115,
			rule:  gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{pathMatch(gatewayv1.PathMatchExact, "/"), pathMatch("Glob", "/*")}},
			want:  unsupportedValue("rule 3: match 1 path type Glob is not supported by Consul's API gateway"),
		},
		{
			name: "unknown header match type",
			caps: consullimits.Consul115,
			rule: gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{{Headers: []gatewayv1.HTTPHeaderMatch{{Type: new(gatewayv1.HeaderMatchType("Prefix")), Name: "X-A", Value: "a"}}}}},
			want: unsupportedValue("rule 0: match 0 header X-A match type Prefix is not supported by Consul's API gateway"),
		},
		{
			name: "unknown query param match type",
			caps: consullimits.Consul115,
			rule: gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{{QueryParams: []gatewayv1.HTTPQueryParamMatch{{Type: new(gatewayv1.QueryParamMatchType("Present")), Name: "q", Value: "x"}}}}},
			want: unsupportedValue("rule 0: match 0 query param q match type Present is not supported by Consul's API gateway"),
		},
		{
			name:  "path regex with lookahead (not RE2)",
			index: 1,
			caps:  allCaps,
			rule:  gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{pathMatch(gatewayv1.PathMatchRegularExpression, "/(?=admin).*")}},
			want:  unsupportedValue("rule 1: match 0 path regex \"/(?=admin).*\" is not valid RE2 (error parsing regexp: invalid or unsupported Perl syntax: `(?=`)"),
		},
		{
			name: "header regex with a backreference (not RE2)",
			caps: allCaps,
			rule: gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{{Headers: []gatewayv1.HTTPHeaderMatch{{Type: new(gatewayv1.HeaderMatchRegularExpression), Name: "X-A", Value: `(a)\1`}}}}},
			want: unsupportedValue("rule 0: match 0 header X-A regex \"(a)\\\\1\" is not valid RE2 (error parsing regexp: invalid escape sequence: `\\1`)"),
		},
		{
			name: "query regex that does not compile",
			caps: allCaps,
			rule: gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{pathMatch(gatewayv1.PathMatchExact, "/"), {QueryParams: []gatewayv1.HTTPQueryParamMatch{{Type: new(gatewayv1.QueryParamMatchRegularExpression), Name: "q", Value: "[a-"}}}}},
			want: unsupportedValue("rule 0: match 1 query param q regex \"[a-\" is not valid RE2 (error parsing regexp: missing closing ]: `[a-`)"),
		},
		{
			name: "an exact header value is no regex",
			caps: consullimits.Consul115,
			rule: gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{{Headers: []gatewayv1.HTTPHeaderMatch{{Name: "X-A", Value: "(?=x"}}}}},
		},
		{
			name: "unknown method",
			caps: consullimits.Consul115,
			rule: gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{{Method: new(gatewayv1.HTTPMethod("PROPFIND"))}}},
			want: unsupportedValue("rule 0: match 0 method PROPFIND is not supported by Consul's API gateway"),
		},
		{
			name:  "RequestRedirect",
			index: 2,
			caps:  allCaps,
			rule: gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect,
				RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{Scheme: new("https")}}}},
			want: unsupportedValue("rule 2: filter RequestRedirect is not supported by Consul's API gateway"),
		},
		{
			name: "RequestMirror",
			caps: allCaps,
			rule: gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{mirror}},
			want: unsupportedValue("rule 0: filter RequestMirror is not supported by Consul's API gateway"),
		},
		{
			name: "ExtensionRef",
			caps: allCaps,
			rule: gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterExtensionRef,
				ExtensionRef: &gatewayv1.LocalObjectReference{Group: "example.com", Kind: "Auth", Name: "x"}}}},
			want: unsupportedValue("rule 0: filter ExtensionRef is not supported by Consul's API gateway"),
		},
		{
			name: "CORS",
			caps: allCaps,
			rule: gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterCORS, CORS: &gatewayv1.HTTPCORSFilter{}}}},
			want: unsupportedValue("rule 0: filter CORS is not supported by Consul's API gateway"),
		},
		{
			name: "ExternalAuth",
			caps: allCaps,
			rule: gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterExternalAuth, ExternalAuth: &gatewayv1.HTTPExternalAuthFilter{}}}},
			want: unsupportedValue("rule 0: filter ExternalAuth is not supported by Consul's API gateway"),
		},
		{
			name: "unknown filter type",
			caps: allCaps,
			rule: gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{{Type: "RateLimit"}}},
			want: unsupportedValue("rule 0: filter RateLimit is not supported by Consul's API gateway"),
		},
		{
			name: "the first unsupported filter is named",
			caps: consullimits.Consul115,
			rule: gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{requestHeaders, responseHeaders, mirror}},
			want: unsupportedValue("rule 0: filter ResponseHeaderModifier is not supported by Consul's API gateway"),
		},
		{
			name: "ResponseHeaderModifier with the capability",
			caps: consullimits.Capabilities{ResponseHeaderModifier: true},
			rule: gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{responseHeaders}},
		},
		{
			name: "ReplacePrefixMatch with one PathPrefix match",
			caps: consullimits.Consul115,
			rule: gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{pathMatch(gatewayv1.PathMatchPathPrefix, "/old")}, Filters: []gatewayv1.HTTPRouteFilter{prefixRewrite("/new")}},
		},
		{
			name: "ReplacePrefixMatch with the default match",
			caps: consullimits.Consul115,
			rule: gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{prefixRewrite("/new")}},
		},
		{
			name: "ReplacePrefixMatch with a match that defaults its path",
			caps: consullimits.Consul115,
			rule: gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{{Method: new(gatewayv1.HTTPMethodGet)}}, Filters: []gatewayv1.HTTPRouteFilter{prefixRewrite("/new")}},
		},
		{
			name: "ReplacePrefixMatch with an Exact match",
			caps: consullimits.Consul115,
			rule: gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{pathMatch(gatewayv1.PathMatchExact, "/old")}, Filters: []gatewayv1.HTTPRouteFilter{prefixRewrite("/new")}},
			want: unsupportedValue("rule 0: filter URLRewrite ReplacePrefixMatch needs exactly one PathPrefix match"),
		},
		{
			name: "ReplacePrefixMatch with two PathPrefix matches",
			caps: consullimits.Consul115,
			rule: gatewayv1.HTTPRouteRule{
				Matches: []gatewayv1.HTTPRouteMatch{pathMatch(gatewayv1.PathMatchPathPrefix, "/a"), pathMatch(gatewayv1.PathMatchPathPrefix, "/b")},
				Filters: []gatewayv1.HTTPRouteFilter{prefixRewrite("/new")},
			},
			want: unsupportedValue("rule 0: filter URLRewrite ReplacePrefixMatch needs exactly one PathPrefix match"),
		},
		{
			name: "ReplaceFullPath on Consul 1.15",
			caps: consullimits.Consul115,
			rule: gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{fullPathRewrite("/new")}},
			want: unsupportedValue("rule 0: filter URLRewrite path type ReplaceFullPath is not supported by Consul's API gateway"),
		},
		{
			name: "ReplaceFullPath with the capability",
			caps: consullimits.Capabilities{FullPathRewrite: true},
			rule: gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{fullPathRewrite("/new")}},
		},
		{
			name: "unknown path modifier type",
			caps: allCaps,
			rule: gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterURLRewrite,
				URLRewrite: &gatewayv1.HTTPURLRewriteFilter{Path: &gatewayv1.HTTPPathModifier{Type: "ReplaceSuffix"}}}}},
			want: unsupportedValue("rule 0: filter URLRewrite path type ReplaceSuffix is not supported by Consul's API gateway"),
		},
		{
			name: "hostname rewrite on Consul 1.15",
			caps: consullimits.Consul115,
			rule: gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterURLRewrite,
				URLRewrite: &gatewayv1.HTTPURLRewriteFilter{Hostname: new(gatewayv1.PreciseHostname("internal.example.com"))}}}},
			want: unsupportedValue("rule 0: filter URLRewrite hostname is not supported by Consul's API gateway"),
		},
		{
			name: "hostname rewrite with the capability",
			caps: consullimits.Capabilities{HostnameRewrite: true},
			rule: gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterURLRewrite,
				URLRewrite: &gatewayv1.HTTPURLRewriteFilter{Hostname: new(gatewayv1.PreciseHostname("internal.example.com"))}}}},
		},
		{
			name: "backendRef RequestMirror",
			caps: allCaps,
			rule: gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("a", 1), httpBackend("b", 1, mirror)}},
			want: unsupportedValue("rule 0: backendRef 1 filter RequestMirror is not supported by Consul's API gateway"),
		},
		{
			name: "backendRef ResponseHeaderModifier on Consul 1.15",
			caps: consullimits.Consul115,
			rule: gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("a", 1, responseHeaders)}},
			want: unsupportedValue("rule 0: backendRef 0 filter ResponseHeaderModifier is not supported by Consul's API gateway"),
		},
		{
			name: "backendRef URLRewrite with a single backend",
			caps: consullimits.Consul115,
			rule: gatewayv1.HTTPRouteRule{
				Matches:     []gatewayv1.HTTPRouteMatch{pathMatch(gatewayv1.PathMatchPathPrefix, "/old")},
				BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("a", 1, prefixRewrite("/new"))},
			},
		},
		{
			name: "backendRef URLRewrite on a split",
			caps: consullimits.Consul115,
			rule: gatewayv1.HTTPRouteRule{
				Matches:     []gatewayv1.HTTPRouteMatch{pathMatch(gatewayv1.PathMatchPathPrefix, "/old")},
				BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("a", 1), httpBackend("b", 1, prefixRewrite("/new"))},
			},
			want: unsupportedValue("rule 0: backendRef 1 filter URLRewrite needs the rule to have exactly one backendRef: Consul ignores a per-service rewrite on a traffic split"),
		},
		{
			name: "backendRef URLRewrite after a rule URLRewrite",
			caps: consullimits.Consul115,
			rule: gatewayv1.HTTPRouteRule{
				Matches:     []gatewayv1.HTTPRouteMatch{pathMatch(gatewayv1.PathMatchPathPrefix, "/old")},
				Filters:     []gatewayv1.HTTPRouteFilter{prefixRewrite("/mid")},
				BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("a", 1, prefixRewrite("/new"))},
			},
			want: unsupportedValue("rule 0: backendRef 0 filter URLRewrite cannot follow a rule-level URLRewrite: Consul would apply only one of them"),
		},
		{
			name: "backendRef ReplacePrefixMatch with an Exact match",
			caps: consullimits.Consul115,
			rule: gatewayv1.HTTPRouteRule{
				Matches:     []gatewayv1.HTTPRouteMatch{pathMatch(gatewayv1.PathMatchExact, "/old")},
				BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("a", 1, prefixRewrite("/new"))},
			},
			want: unsupportedValue("rule 0: backendRef 0 filter URLRewrite ReplacePrefixMatch needs exactly one PathPrefix match"),
		},
		{
			name: "backendRef URLRewrite without the capability",
			caps: consullimits.Capabilities{},
			rule: gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("a", 1, prefixRewrite("/new"))}},
			want: unsupportedValue("rule 0: backendRef 0 filter URLRewrite is not supported by Consul's API gateway"),
		},
		{
			name: "request timeout",
			caps: consullimits.Consul115,
			rule: gatewayv1.HTTPRouteRule{Timeouts: &gatewayv1.HTTPRouteTimeouts{Request: new(gatewayv1.Duration("10s"))}},
			want: unsupportedValue("rule 0: timeouts is not supported by Consul's API gateway"),
		},
		{
			name: "backend request timeout",
			caps: consullimits.Consul115,
			rule: gatewayv1.HTTPRouteRule{Timeouts: &gatewayv1.HTTPRouteTimeouts{BackendRequest: new(gatewayv1.Duration("1s"))}},
			want: unsupportedValue("rule 0: timeouts is not supported by Consul's API gateway"),
		},
		{
			name: "empty retry stanza still asks for retries",
			caps: consullimits.Consul115,
			rule: gatewayv1.HTTPRouteRule{Retry: &gatewayv1.HTTPRouteRetry{}},
			want: unsupportedValue("rule 0: retry is not supported by Consul's API gateway"),
		},
		{
			name: "session persistence",
			caps: consullimits.Consul115,
			rule: gatewayv1.HTTPRouteRule{SessionPersistence: &gatewayv1.SessionPersistence{SessionName: new("s")}},
			want: unsupportedValue("rule 0: sessionPersistence is not supported by Consul's API gateway"),
		},
		{
			name: "timeouts, retry and session persistence with the capabilities",
			caps: allCaps,
			rule: gatewayv1.HTTPRouteRule{
				Timeouts:           &gatewayv1.HTTPRouteTimeouts{Request: new(gatewayv1.Duration("10s"))},
				Retry:              &gatewayv1.HTTPRouteRetry{Attempts: new(3)},
				SessionPersistence: &gatewayv1.SessionPersistence{},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := httpRuleProblem(tt.index, tt.rule, tt.caps)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("httpRuleProblem (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTCPRuleProblem(t *testing.T) {
	backend := func(name string, weight *int32) gatewayv1.BackendRef {
		return gatewayv1.BackendRef{
			BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(name), Port: new(gatewayv1.PortNumber(5432))},
			Weight:                 weight,
		}
	}
	tests := []struct {
		name  string
		index int
		refs  []gatewayv1.BackendRef
		caps  consullimits.Capabilities
		want  *ruleProblem
	}{
		{name: "no backends", caps: consullimits.Consul115},
		{name: "one backend, default weight", caps: consullimits.Consul115, refs: []gatewayv1.BackendRef{backend("db", nil)}},
		{name: "one backend, weight 0", caps: consullimits.Consul115, refs: []gatewayv1.BackendRef{backend("db", new(int32(0)))}},
		{name: "a weight-0 backend does not count", caps: consullimits.Consul115, refs: []gatewayv1.BackendRef{backend("db", new(int32(5))), backend("old", new(int32(0)))}},
		{
			name: "two backends with traffic",
			caps: consullimits.Consul115,
			refs: []gatewayv1.BackendRef{backend("a", nil), backend("b", new(int32(1)))},
			want: unsupportedValue("rule 0: backendRefs: 2 backends would receive traffic, but Consul's tcp-route forwards to a single service"),
		},
		{
			name:  "index is named",
			index: 4,
			caps:  consullimits.Consul115,
			refs:  []gatewayv1.BackendRef{backend("a", nil), backend("b", nil), backend("c", nil)},
			want:  unsupportedValue("rule 4: backendRefs: 3 backends would receive traffic, but Consul's tcp-route forwards to a single service"),
		},
		{name: "weighted backends with the capability", caps: consullimits.Capabilities{TCPWeightedBackends: true}, refs: []gatewayv1.BackendRef{backend("a", nil), backend("b", nil)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tcpRuleProblem(tt.index, gatewayv1.TCPRouteRule{BackendRefs: tt.refs}, tt.caps)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("tcpRuleProblem (-want +got):\n%s", diff)
			}
		})
	}
}

// TestConsul115 pins the Consul 1.15 capability set read from its source, so a change
// to it is a deliberate edit of this test too.
func TestConsul115(t *testing.T) {
	want := consullimits.Capabilities{SingleBackendURLRewrite: true}
	if diff := cmp.Diff(want, consullimits.Consul115, cmp.AllowUnexported(consullimits.Capabilities{})); diff != "" {
		t.Errorf("consullimits.Consul115 (-want +got):\n%s", diff)
	}
}

// TestRefusedRequestsOutcome: an HTTPRoute's status says that the requests of a rule
// Consul cannot program, and of an unresolved backend, are answered with an error,
// not served elsewhere; a TCPRoute's says nothing it does not do.
func TestRefusedRequestsOutcome(t *testing.T) {
	problem := &ruleProblem{Reason: gatewayv1.RouteReasonUnsupportedValue, Message: "rule 1: filter ExtensionRef " + consullimits.NotSupported}
	backend := &backendProblem{Reason: gatewayv1.RouteReasonBackendNotFound, Message: "backendRef apps/gone refers to a Service that does not exist"}
	for _, tt := range []struct {
		kind                       gatewayv1.Kind
		caps                       consullimits.Capabilities
		partiallyInvalid, resolved string
	}{
		{"HTTPRoute", consullimits.Capabilities{},
			"Dropped Rule(s) Consul cannot program, whose requests are answered with HTTP 503: rule 1: filter ExtensionRef is not supported by Consul's API gateway",
			"backendRef apps/gone refers to a Service that does not exist; requests for unresolved backends are answered with HTTP 503"},
		// With --responder-service the responder answers them, as the spec asks.
		{"HTTPRoute", consullimits.Capabilities{}.WithResponder("responder"),
			"Dropped Rule(s) Consul cannot program, whose requests are answered with HTTP 500: rule 1: filter ExtensionRef is not supported by Consul's API gateway",
			"backendRef apps/gone refers to a Service that does not exist; requests for unresolved backends are answered with HTTP 500"},
		{"TCPRoute", consullimits.Capabilities{},
			"Dropped Rule(s) Consul cannot program: rule 1: filter ExtensionRef is not supported by Consul's API gateway",
			"backendRef apps/gone refers to a Service that does not exist"},
	} {
		rules := routeRules{kind: tt.kind, caps: tt.caps, count: 2, problems: []*ruleProblem{nil, problem}, backend: backend}
		conds := rules.parentConditions(parentBinding{accepted: true}, contract.Verdict{}, 1)
		got := map[string]string{}
		for _, c := range conds {
			got[c.Type] = c.Message
		}
		if got["PartiallyInvalid"] != tt.partiallyInvalid {
			t.Errorf("%s PartiallyInvalid message %q, want %q", tt.kind, got["PartiallyInvalid"], tt.partiallyInvalid)
		}
		if got["ResolvedRefs"] != tt.resolved {
			t.Errorf("%s ResolvedRefs message %q, want %q", tt.kind, got["ResolvedRefs"], tt.resolved)
		}
	}
}
