package translate

import (
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestHTTPMatch(t *testing.T) {
	tests := []struct {
		name    string
		match   gatewayv1.HTTPRouteMatch
		want    consulapi.HTTPMatch
		wantErr string
	}{
		{name: "empty is prefix /", want: consulapi.HTTPMatch{Path: consulapi.HTTPPathMatch{Match: "prefix", Value: "/"}}},
		{name: "path without type is a prefix", match: gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Value: new("/a")}},
			want: consulapi.HTTPMatch{Path: consulapi.HTTPPathMatch{Match: "prefix", Value: "/a"}}},
		{name: "exact", match: gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: new(gatewayv1.PathMatchExact), Value: new("/a")}},
			want: consulapi.HTTPMatch{Path: consulapi.HTTPPathMatch{Match: "exact", Value: "/a"}}},
		{name: "regex", match: gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: new(gatewayv1.PathMatchRegularExpression), Value: new("/a.*")}},
			want: consulapi.HTTPMatch{Path: consulapi.HTTPPathMatch{Match: "regex", Value: "/a.*"}}},
		{name: "headers, query, method", match: gatewayv1.HTTPRouteMatch{
			Headers:     []gatewayv1.HTTPHeaderMatch{{Name: "h1", Value: "v"}, {Type: new(gatewayv1.HeaderMatchRegularExpression), Name: "h2", Value: "r"}},
			QueryParams: []gatewayv1.HTTPQueryParamMatch{{Name: "q1", Value: "v"}, {Type: new(gatewayv1.QueryParamMatchRegularExpression), Name: "q2", Value: "r"}},
			Method:      new(gatewayv1.HTTPMethodDelete),
		}, want: consulapi.HTTPMatch{
			Path:    consulapi.HTTPPathMatch{Match: "prefix", Value: "/"},
			Headers: []consulapi.HTTPHeaderMatch{{Match: "exact", Name: "h1", Value: "v"}, {Match: "regex", Name: "h2", Value: "r"}},
			Query:   []consulapi.HTTPQueryMatch{{Match: "exact", Name: "q1", Value: "v"}, {Match: "regex", Name: "q2", Value: "r"}},
			Method:  "DELETE",
		}},
		{name: "unknown path type", match: gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: new(gatewayv1.PathMatchType("Suffix")), Value: new("/a")}},
			wantErr: "path match type Suffix is not supported by Consul's API gateway"},
		{name: "unknown header type", match: gatewayv1.HTTPRouteMatch{Headers: []gatewayv1.HTTPHeaderMatch{{Type: new(gatewayv1.HeaderMatchType("Prefix")), Name: "h"}}},
			wantErr: "header match type Prefix is not supported by Consul's API gateway"},
		{name: "unknown query type", match: gatewayv1.HTTPRouteMatch{QueryParams: []gatewayv1.HTTPQueryParamMatch{{Type: new(gatewayv1.QueryParamMatchType("Present")), Name: "q"}}},
			wantErr: "query param match type Present is not supported by Consul's API gateway"},
		{name: "unknown method", match: gatewayv1.HTTPRouteMatch{Method: new(gatewayv1.HTTPMethod("BREW"))},
			wantErr: "method BREW is not supported by Consul's API gateway"},
	}
	for _, tt := range tests {
		got, err := httpMatch(tt.match)
		if errString(err) != tt.wantErr {
			t.Errorf("%s: error %q, want %q", tt.name, errString(err), tt.wantErr)
		}
		if diff := gocmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
	got, err := httpMatches(nil)
	if diff := gocmp.Diff([]consulapi.HTTPMatch{{Path: consulapi.HTTPPathMatch{Match: "prefix", Value: "/"}}}, got); diff != "" || err != nil {
		t.Errorf("no matches: %v (-want +got):\n%s", err, diff)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestHTTPFilters(t *testing.T) {
	rewrite := func(t gatewayv1.HTTPPathModifierType, prefix, full *string) gatewayv1.HTTPRouteFilter {
		return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{
			Path: &gatewayv1.HTTPPathModifier{Type: t, ReplacePrefixMatch: prefix, ReplaceFullPath: full},
		}}
	}
	headers := func(h gatewayv1.HTTPHeaderFilter) gatewayv1.HTTPRouteFilter {
		return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &h}
	}
	tests := []struct {
		name    string
		filters []gatewayv1.HTTPRouteFilter
		want    consulapi.HTTPFilters
		wantErr string
	}{
		{name: "none"},
		{name: "headers", filters: []gatewayv1.HTTPRouteFilter{headers(gatewayv1.HTTPHeaderFilter{
			Set: []gatewayv1.HTTPHeader{{Name: "s", Value: "1"}}, Add: []gatewayv1.HTTPHeader{{Name: "a", Value: "2"}}, Remove: []string{"r"},
		})}, want: consulapi.HTTPFilters{Headers: []consulapi.HTTPHeaderFilter{{Set: map[string]string{"s": "1"}, Add: map[string]string{"a": "2"}, Remove: []string{"r"}}}}},
		{name: "empty header modifier changes nothing", filters: []gatewayv1.HTTPRouteFilter{headers(gatewayv1.HTTPHeaderFilter{})}},
		{name: "prefix rewrite", filters: []gatewayv1.HTTPRouteFilter{rewrite(gatewayv1.PrefixMatchHTTPPathModifier, new("/new"), nil)},
			want: consulapi.HTTPFilters{URLRewrite: &consulapi.URLRewrite{Path: "/new"}}},
		// The replacement as written: rewrittenRules makes each match's prefix rewrite of it.
		{name: "empty prefix rewrite", filters: []gatewayv1.HTTPRouteFilter{rewrite(gatewayv1.PrefixMatchHTTPPathModifier, new(""), nil)},
			want: consulapi.HTTPFilters{URLRewrite: &consulapi.URLRewrite{Path: ""}}},
		{name: "rewrite without path", filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{}}}},
		{name: "full path rewrite", filters: []gatewayv1.HTTPRouteFilter{rewrite(gatewayv1.FullPathHTTPPathModifier, nil, new("/x"))},
			wantErr: "filter URLRewrite path type ReplaceFullPath is not supported by Consul's API gateway"},
		{name: "hostname rewrite", filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{Hostname: new(gatewayv1.PreciseHostname("x.example.com"))}}},
			wantErr: "filter URLRewrite hostname is not supported by Consul's API gateway"},
		{name: "response headers", filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: &gatewayv1.HTTPHeaderFilter{}}},
			wantErr: "filter ResponseHeaderModifier is not supported by Consul's API gateway"},
		{name: "redirect", filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{}}},
			wantErr: "filter RequestRedirect is not supported by Consul's API gateway"},
	}
	for _, tt := range tests {
		got, err := httpFilters(tt.filters)
		if errString(err) != tt.wantErr {
			t.Errorf("%s: error %q, want %q", tt.name, errString(err), tt.wantErr)
		}
		if diff := gocmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestSegmentPrefixes(t *testing.T) {
	prefix := func(v string) consulapi.HTTPMatch {
		return consulapi.HTTPMatch{Path: consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchPrefix, Value: v}, Method: consulapi.HTTPMatchMethodGet}
	}
	exact := func(v string) consulapi.HTTPMatch {
		return consulapi.HTTPMatch{Path: consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchExact, Value: v}, Method: consulapi.HTTPMatchMethodGet}
	}
	tests := []struct {
		name string
		in   []consulapi.HTTPMatch
		want []consulapi.HTTPMatch
	}{
		{"root stays a prefix", []consulapi.HTTPMatch{prefix("/")}, []consulapi.HTTPMatch{prefix("/")}},
		{"a segment becomes exact or subtree", []consulapi.HTTPMatch{prefix("/v2")}, []consulapi.HTTPMatch{exact("/v2"), prefix("/v2/")}},
		{"a trailing slash is the same segment", []consulapi.HTTPMatch{prefix("/v2/")}, []consulapi.HTTPMatch{exact("/v2"), prefix("/v2/")}},
		{"exact matches stay", []consulapi.HTTPMatch{exact("/a"), prefix("/b")}, []consulapi.HTTPMatch{exact("/a"), exact("/b"), prefix("/b/")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := gocmp.Diff(tt.want, segmentPrefixes(tt.in)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
