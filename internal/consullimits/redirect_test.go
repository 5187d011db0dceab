package consullimits

import (
	"strings"
	"testing"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func redirectRule(r gatewayv1.HTTPRequestRedirectFilter, matches ...gatewayv1.HTTPRouteMatch) gatewayv1.HTTPRouteRule {
	return gatewayv1.HTTPRouteRule{Matches: matches, Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &r}}}
}

func pathMatch(t gatewayv1.PathMatchType, value string) gatewayv1.HTTPRouteMatch {
	return gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: &t, Value: &value}}
}

// With a responder, RequestRedirect is accepted as far as the responder answers it,
// and refused with what it cannot; without one, it is refused whole.
func TestHTTPRuleProblemRequestRedirect(t *testing.T) {
	withResponder := Consul115
	withResponder.RequestRedirect = true
	prefix := func(p string) *gatewayv1.HTTPPathModifier {
		return &gatewayv1.HTTPPathModifier{Type: gatewayv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: &p}
	}
	tests := []struct {
		name string
		rule gatewayv1.HTTPRouteRule
		caps Capabilities
		want string // "" when accepted, else a part of the problem
	}{
		{"without a responder", redirectRule(gatewayv1.HTTPRequestRedirectFilter{Hostname: new(gatewayv1.PreciseHostname("a"))}), Consul115,
			"filter RequestRedirect " + NotSupported},
		{"hostname and 301", redirectRule(gatewayv1.HTTPRequestRedirectFilter{Hostname: new(gatewayv1.PreciseHostname("a")), StatusCode: new(301)}), withResponder, ""},
		{"scheme https and port", redirectRule(gatewayv1.HTTPRequestRedirectFilter{Scheme: new("https"), Port: new(gatewayv1.PortNumber(8443))}), withResponder, ""},
		{"each status Gateway API allows", redirectRule(gatewayv1.HTTPRequestRedirectFilter{StatusCode: new(308)}), withResponder, ""},
		{"full path", redirectRule(gatewayv1.HTTPRequestRedirectFilter{Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.FullPathHTTPPathModifier, ReplaceFullPath: new("/x")}},
			pathMatch(gatewayv1.PathMatchExact, "/a")), withResponder, ""},
		{"prefix with one PathPrefix match", redirectRule(gatewayv1.HTTPRequestRedirectFilter{Path: prefix("/b")}, pathMatch(gatewayv1.PathMatchPathPrefix, "/a")), withResponder, ""},
		{"prefix without a match", redirectRule(gatewayv1.HTTPRequestRedirectFilter{Path: prefix("/b")}), withResponder, ""},
		{"prefix with an exact match", redirectRule(gatewayv1.HTTPRequestRedirectFilter{Path: prefix("/b")}, pathMatch(gatewayv1.PathMatchExact, "/a")), withResponder,
			"ReplacePrefixMatch needs exactly one PathPrefix match"},
		{"an unknown scheme", redirectRule(gatewayv1.HTTPRequestRedirectFilter{Scheme: new("ftp")}), withResponder, `scheme "ftp" ` + NotSupported},
		{"an unknown status", redirectRule(gatewayv1.HTTPRequestRedirectFilter{StatusCode: new(399)}), withResponder, "statusCode 399 " + NotSupported},
		{"an unknown path type", redirectRule(gatewayv1.HTTPRequestRedirectFilter{Path: &gatewayv1.HTTPPathModifier{Type: "Regex"}}), withResponder, "path type Regex " + NotSupported},
		{"a header filter on the directive header", gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{headerModifier(set("x-consul-gateway-controller-directive", "{}"))}}, withResponder,
			"reserved for the responder"},
		{"removing the directive header", gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{headerModifier(gatewayv1.HTTPHeaderFilter{Remove: []string{"X-Consul-Gateway-Controller-Directive"}})}}, Consul115,
			"reserved for the responder"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := HTTPRuleProblem(tt.rule, tt.caps)
			if tt.want == "" && got != "" {
				t.Fatalf("refused: %s", got)
			}
			if !strings.Contains(got, tt.want) || (tt.want != "" && got == "") {
				t.Errorf("problem %q, want one saying %q", got, tt.want)
			}
		})
	}
}
