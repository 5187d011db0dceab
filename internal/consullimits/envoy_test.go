package consullimits

import (
	"strings"
	"testing"

	consulapi "github.com/hashicorp/consul/api"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func headerModifier(h gatewayv1.HTTPHeaderFilter) gatewayv1.HTTPRouteFilter {
	return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &h}
}

func set(name, value string) gatewayv1.HTTPHeaderFilter {
	return gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: gatewayv1.HTTPHeaderName(name), Value: value}}}
}

func prefixRewrite(replacement string) gatewayv1.HTTPRouteFilter {
	return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{
		Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: &replacement},
	}}
}

func regexPath(value string) gatewayv1.HTTPRouteMatch {
	return gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: new(gatewayv1.PathMatchRegularExpression), Value: &value}}
}

func onBackend(f gatewayv1.HTTPRouteFilter) gatewayv1.HTTPRouteRule {
	return gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{{
		BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "web"}},
		Filters:    []gatewayv1.HTTPRouteFilter{f},
	}}}
}

// Each kind of value Consul copies into the gateway's route configuration unchecked
// and Envoy 1.27 refuses, as a rule: HTTPRuleProblem must refuse the rule and say
// where and why.
func TestHTTPRuleProblemRefusesWhatEnvoyRefuses(t *testing.T) {
	tests := []struct {
		name string
		rule gatewayv1.HTTPRouteRule
		want []string // the message holds each
	}{
		{"set Host", gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{headerModifier(set("Host", "a.example.com"))}},
			[]string{"filter RequestHeaderModifier set", `header "Host"`, "no route may modify", EnvoyRefuses}},
		{"add host in lower case", gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{headerModifier(gatewayv1.HTTPHeaderFilter{Add: []gatewayv1.HTTPHeader{{Name: "host", Value: "x"}}})}},
			[]string{"filter RequestHeaderModifier add", `header "host"`}},
		{"remove a pseudo-header", gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{headerModifier(gatewayv1.HTTPHeaderFilter{Remove: []string{":path"}})}},
			[]string{"filter RequestHeaderModifier remove", `header ":path"`}},
		{"remove HOST", gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{headerModifier(gatewayv1.HTTPHeaderFilter{Remove: []string{"HOST"}})}},
			[]string{"remove", `header "HOST"`}},
		{"remove an empty name", gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{headerModifier(gatewayv1.HTTPHeaderFilter{Remove: []string{""}})}},
			[]string{"remove has an empty header name"}},
		{"remove a name with LF", gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{headerModifier(gatewayv1.HTTPHeaderFilter{Remove: []string{"x-a\nx-b"}})}},
			[]string{"NUL, CR or LF"}},
		{"value with CR LF", gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{headerModifier(set("x-a", "1\r\nx-injected: 2"))}},
			[]string{"set", "header x-a value", "NUL, CR or LF"}},
		{"value with NUL", gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{headerModifier(set("x-a", "a\x00b"))}},
			[]string{"NUL, CR or LF"}},
		{"value too long once escaped", gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{headerModifier(set("x-a", strings.Repeat("%", 8193)))}},
			[]string{"16386 bytes once its %s are escaped"}},
		{"backendRef filter sets Host", onBackend(headerModifier(set("Host", "x"))),
			[]string{"backendRef 0 filter RequestHeaderModifier set", `header "Host"`}},
		{"prefix rewrite with LF", gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{prefixRewrite("/a\nb")}},
			[]string{"filter URLRewrite ReplacePrefixMatch has replacement", "NUL, CR or LF"}},
		{"backendRef prefix rewrite with CR", onBackend(prefixRewrite("/a\rb")),
			[]string{"backendRef 0 filter URLRewrite ReplacePrefixMatch", "NUL, CR or LF"}},
		{"header match name with CR", gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{{Headers: []gatewayv1.HTTPHeaderMatch{{Name: "x\r", Value: "1"}}}}},
			[]string{"match 0 header match has header name", "NUL, CR or LF"}},
		{"empty query param name", gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{{QueryParams: []gatewayv1.HTTPQueryParamMatch{{Name: "", Value: "1"}}}}},
			[]string{"query param match has an empty query param name"}},
		{"long query param name", gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{{QueryParams: []gatewayv1.HTTPQueryParamMatch{{Name: gatewayv1.HTTPHeaderName(strings.Repeat("q", 1025)), Value: "1"}}}}},
			[]string{"longer than 1024 bytes"}},
		{"regex group named the .NET way", gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{regexPath("/(?<id>[0-9]+)")}},
			[]string{"(?<name>...)", "(?P<name>...)"}},
		{"regex RE2 cannot compile", gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{regexPath("/(?=a)")}},
			[]string{"not valid RE2"}},
		{"empty regex, which Consul drops", gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{regexPath("")}},
			[]string{"regex is empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := HTTPRuleProblem(tt.rule, Consul115)
			if got == "" {
				t.Fatal("no problem, want the rule refused")
			}
			for _, want := range tt.want {
				if !strings.Contains(got, want) {
					t.Errorf("problem %q does not say %q", got, want)
				}
			}
		})
	}
}

// What Envoy accepts next to the refusals above: the rule must not be refused.
func TestHTTPRuleProblemAcceptsWhatEnvoyAccepts(t *testing.T) {
	tests := []struct {
		name string
		rule gatewayv1.HTTPRouteRule
	}{
		{"a header named like Host", gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{headerModifier(set("X-Forwarded-Host", "a"))}}},
		{"a value with %, escaped by the translation", gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{headerModifier(set("x-rate", "100%"))}}},
		{"a value with a tab and spaces", gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{headerModifier(set("x-a", "a\tb c"))}}},
		{"a value of 16384 bytes once escaped", gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{headerModifier(set("x-a", strings.Repeat("%", 8192)))}}},
		{"removing a header named like a pseudo-header's", gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{headerModifier(gatewayv1.HTTPHeaderFilter{Remove: []string{"path", "x:y"}})}}},
		{"an empty replacement", gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{prefixRewrite("")}}},
		{"a query param name of 1024 bytes", gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{{QueryParams: []gatewayv1.HTTPQueryParamMatch{{Name: gatewayv1.HTTPHeaderName(strings.Repeat("q", 1024)), Value: "1"}}}}}},
		{"a Python named group", gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{regexPath("/(?P<id>[0-9]+)")}}},
		{"(?< as literal text", gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{regexPath(`/\(?<[(?<]\Q(?<\E[[:alpha:](?<]`)}}},
		// Size is not a limit: consul-dataplane's bootstrap raises Envoy's
		// re2.max_program_size.error_level to 1048576.
		{"a long regex", gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{regexPath("/" + strings.Repeat("(a|b)", 200))}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := HTTPRuleProblem(tt.rule, Consul115); got != "" {
				t.Errorf("refused: %s", got)
			}
		})
	}
}

func TestEscapeHeaderValue(t *testing.T) {
	for in, want := range map[string]string{"": "", "plain": "plain", "100%": "100%%", "%START_TIME%": "%%START_TIME%%", "%%": "%%%%"} {
		if got := EscapeHeaderValue(in); got != want {
			t.Errorf("EscapeHeaderValue(%q) = %q, want %q", in, got, want)
		}
	}
}

// The check of a rule as written to Consul refuses each kind HTTPRuleProblem refuses
// in the Gateway API rule, and a value the translation did not escape.
func TestHTTPRouteRuleEnvoyProblem(t *testing.T) {
	regex := func(v string) consulapi.HTTPMatch {
		return consulapi.HTTPMatch{Path: consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchRegularExpression, Value: v}}
	}
	headers := func(h consulapi.HTTPHeaderFilter) consulapi.HTTPFilters {
		return consulapi.HTTPFilters{Headers: []consulapi.HTTPHeaderFilter{h}}
	}
	tests := []struct {
		name string
		rule consulapi.HTTPRouteRule
		want string // "" when Envoy accepts the rule
	}{
		{"escaped %", consulapi.HTTPRouteRule{Filters: headers(consulapi.HTTPHeaderFilter{Set: map[string]string{"x": "100%% %%START_TIME%%"}})}, ""},
		{"a header match and a regex Envoy takes", consulapi.HTTPRouteRule{Matches: []consulapi.HTTPMatch{
			{Path: consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchPrefix, Value: "/"}, Headers: []consulapi.HTTPHeaderMatch{{Match: consulapi.HTTPHeaderMatchRegularExpression, Name: "x", Value: "a|b"}}},
		}}, ""},
		{"unescaped %", consulapi.HTTPRouteRule{Filters: headers(consulapi.HTTPHeaderFilter{Add: map[string]string{"x": "100%"}})}, "start of a command"},
		{"a command", consulapi.HTTPRouteRule{Filters: headers(consulapi.HTTPHeaderFilter{Add: map[string]string{"x": "%START_TIME%"}})}, "start of a command"},
		{"set Host", consulapi.HTTPRouteRule{Filters: headers(consulapi.HTTPHeaderFilter{Set: map[string]string{"HOST": "x"}})}, `header "HOST"`},
		{"remove :method", consulapi.HTTPRouteRule{Filters: headers(consulapi.HTTPHeaderFilter{Remove: []string{":method"}})}, `header ":method"`},
		{"value with LF", consulapi.HTTPRouteRule{Filters: headers(consulapi.HTTPHeaderFilter{Set: map[string]string{"x": "a\nb"}})}, "NUL, CR or LF"},
		{"service value with CR", consulapi.HTTPRouteRule{Services: []consulapi.HTTPService{{Name: "web", Filters: headers(consulapi.HTTPHeaderFilter{Set: map[string]string{"x": "a\rb"}})}}}, "service web filters set"},
		{"prefix rewrite with NUL", consulapi.HTTPRouteRule{Filters: consulapi.HTTPFilters{URLRewrite: &consulapi.URLRewrite{Path: "/a\x00"}}}, "URLRewrite has replacement"},
		{"header match name with LF", consulapi.HTTPRouteRule{Matches: []consulapi.HTTPMatch{{Headers: []consulapi.HTTPHeaderMatch{{Match: consulapi.HTTPHeaderMatchExact, Name: "x\n", Value: "1"}}}}}, "match 0 header match"},
		{"empty query param name", consulapi.HTTPRouteRule{Matches: []consulapi.HTTPMatch{{Query: []consulapi.HTTPQueryMatch{{Match: consulapi.HTTPQueryMatchExact, Value: "1"}}}}}, "empty query param name"},
		{"path regex group named (?<id>)", consulapi.HTTPRouteRule{Matches: []consulapi.HTTPMatch{regex("/(?<id>a)")}}, "(?P<name>...)"},
		{"query regex RE2 cannot compile", consulapi.HTTPRouteRule{Matches: []consulapi.HTTPMatch{{Query: []consulapi.HTTPQueryMatch{{Match: consulapi.HTTPQueryMatchRegularExpression, Name: "q", Value: `(a)\1`}}}}}, "not valid RE2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := HTTPRouteRuleEnvoyProblem(tt.rule)
			if (got == "") != (tt.want == "") || !strings.Contains(got, tt.want) {
				t.Errorf("problem %q, want one saying %q", got, tt.want)
			}
		})
	}
}
