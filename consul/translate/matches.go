package translate

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
)

// httpMatches translates a rule's matches. No matches means every request: the CRD
// default is one PathPrefix "/" match.
func httpMatches(matches []gatewayv1.HTTPRouteMatch) ([]consulapi.HTTPMatch, error) {
	if len(matches) == 0 {
		return []consulapi.HTTPMatch{{Path: consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchPrefix, Value: "/"}}}, nil
	}
	out := make([]consulapi.HTTPMatch, 0, len(matches))
	for i, m := range matches {
		match, err := httpMatch(m)
		if err != nil {
			return nil, fmt.Errorf("match %d: %w", i, err)
		}
		out = append(out, match)
	}
	return out, nil
}

// segmentPrefixes makes prefix matches match whole path segments, as Gateway API's
// PathPrefix does: Consul (Envoy) matches a plain string prefix, so prefix "/v2" would
// also match "/v2example". Prefix "/v2" (or "/v2/") becomes exact "/v2" or prefix
// "/v2/", with the match's other conditions on both. Prefix "/" is already exact.
func segmentPrefixes(matches []consulapi.HTTPMatch) []consulapi.HTTPMatch {
	out := make([]consulapi.HTTPMatch, 0, len(matches))
	for _, m := range matches {
		prefix := strings.TrimSuffix(m.Path.Value, "/")
		if m.Path.Match != consulapi.HTTPPathMatchPrefix || prefix == "" {
			out = append(out, m)
			continue
		}
		exact, subtree := m, m
		exact.Path = consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchExact, Value: prefix}
		subtree.Path = consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchPrefix, Value: prefix + "/"}
		out = append(out, exact, subtree)
	}
	return out
}

// rewrittenRules are the http-route rules of a rule with matches, filters and
// services. Without a URLRewrite that is one rule with the segment matches (see
// segmentPrefixes).
//
// ReplacePrefixMatch (on the rule, or on its one service) needs a rule per segment
// match: Envoy's prefix_rewrite swaps the matched string for the replacement, and
// Consul gives all matches of a rule one replacement, where the exact and the subtree
// match need different ones (see prefixRewrites). Consul orders its routes by path
// length, then header and query counts, whatever rule they come from, so splitting a
// rule changes no precedence.
func rewrittenRules(matches []consulapi.HTTPMatch, filters consulapi.HTTPFilters, services []consulapi.HTTPService) ([]consulapi.HTTPRouteRule, error) {
	replacement, ok := prefixReplacement(filters, services)
	if !ok {
		return []consulapi.HTTPRouteRule{{Matches: segmentPrefixes(matches), Filters: filters, Services: services}}, nil
	}
	// The CRD allows ReplacePrefixMatch only with exactly one PathPrefix match, and the
	// status pipeline refuses objects that skipped validation.
	if len(matches) != 1 || matches[0].Path.Match != consulapi.HTTPPathMatchPrefix {
		return nil, fmt.Errorf("filter URLRewrite ReplacePrefixMatch needs exactly one PathPrefix match")
	}
	var rules []consulapi.HTTPRouteRule
	for _, pr := range prefixRewrites(matches[0], replacement) {
		rules = append(rules, consulapi.HTTPRouteRule{
			Matches:  []consulapi.HTTPMatch{pr.match},
			Filters:  withPrefixRewrite(filters, pr.rewrite),
			Services: servicesWithPrefixRewrite(services, pr.rewrite),
		})
	}
	return rules, nil
}

// prefixReplacement is the ReplacePrefixMatch of a rule's filters or of its one
// service's, as written in the route; ok is false when neither rewrites.
func prefixReplacement(filters consulapi.HTTPFilters, services []consulapi.HTTPService) (string, bool) {
	if filters.URLRewrite != nil {
		return filters.URLRewrite.Path, true
	}
	for _, s := range services {
		if s.Filters.URLRewrite != nil {
			return s.Filters.URLRewrite.Path, true
		}
	}
	return "", false
}

// prefixRewrite is a segment match and the prefix rewrite Envoy applies to it.
type prefixRewrite struct {
	match   consulapi.HTTPMatch
	rewrite string
}

// prefixRewrites gives the segment matches of PathPrefix match m the prefix rewrites
// that make Envoy's prefix_rewrite replace the matched prefix with replacement as
// Gateway API's ReplacePrefixMatch does (HTTPPathModifier's table). Trailing slashes
// of the prefix and of the replacement do not count:
//
//   - exact "/foo" is rewritten to the replacement, or "/" when that is empty:
//     "/foo" -> "/xyz", and with "" or "/", "/foo" -> "/";
//   - prefix "/foo/" is rewritten to the replacement and "/": "/foo/bar" ->
//     "/xyz/bar", "/foo/" -> "/xyz/", and with "" or "/", "/foo/bar" -> "/bar".
//
// Prefix "/" is the same with "" for "/foo": "/" -> "/xyz", "/bar" -> "/xyz/bar"; with
// an empty replacement nothing changes and the one prefix "/" match is kept.
func prefixRewrites(m consulapi.HTTPMatch, replacement string) []prefixRewrite {
	prefix := strings.TrimRight(m.Path.Value, "/")
	replacement = strings.TrimRight(replacement, "/")
	exact, subtree := m, m
	exact.Path = consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchExact, Value: cmp.Or(prefix, "/")}
	subtree.Path = consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchPrefix, Value: prefix + "/"}
	if prefix == "" && replacement == "" {
		return []prefixRewrite{{subtree, "/"}}
	}
	return []prefixRewrite{{exact, cmp.Or(replacement, "/")}, {subtree, replacement + "/"}}
}

// withPrefixRewrite is filters with its URLRewrite, if any, replaced by rewrite.
func withPrefixRewrite(filters consulapi.HTTPFilters, rewrite string) consulapi.HTTPFilters {
	if filters.URLRewrite != nil {
		filters.URLRewrite = &consulapi.URLRewrite{Path: rewrite}
	}
	return filters
}

// servicesWithPrefixRewrite is services with each URLRewrite replaced by rewrite.
func servicesWithPrefixRewrite(services []consulapi.HTTPService, rewrite string) []consulapi.HTTPService {
	out := slices.Clone(services)
	for i := range out {
		out[i].Filters = withPrefixRewrite(out[i].Filters, rewrite)
	}
	return out
}

// httpMatch translates one match, applying the CRD defaults to unset fields (path
// PathPrefix "/", header and query type Exact). Types Consul has no equivalent for are
// an error: the status pipeline refuses them, so meeting one means the confirmation
// and this code disagree, and a dropped condition would widen the match.
func httpMatch(m gatewayv1.HTTPRouteMatch) (consulapi.HTTPMatch, error) {
	path, err := pathMatch(m.Path)
	if err != nil {
		return consulapi.HTTPMatch{}, err
	}
	out := consulapi.HTTPMatch{Path: path}
	for _, h := range m.Headers {
		t := gatewayv1.HeaderMatchExact
		if h.Type != nil {
			t = *h.Type
		}
		mt, ok := map[gatewayv1.HeaderMatchType]consulapi.HTTPHeaderMatchType{
			gatewayv1.HeaderMatchExact:             consulapi.HTTPHeaderMatchExact,
			gatewayv1.HeaderMatchRegularExpression: consulapi.HTTPHeaderMatchRegularExpression,
		}[t]
		if !ok {
			return consulapi.HTTPMatch{}, fmt.Errorf("header match type %s %s", t, consullimits.NotSupported)
		}
		out.Headers = append(out.Headers, consulapi.HTTPHeaderMatch{Match: mt, Name: string(h.Name), Value: h.Value})
	}
	for _, q := range m.QueryParams {
		t := gatewayv1.QueryParamMatchExact
		if q.Type != nil {
			t = *q.Type
		}
		mt, ok := map[gatewayv1.QueryParamMatchType]consulapi.HTTPQueryMatchType{
			gatewayv1.QueryParamMatchExact:             consulapi.HTTPQueryMatchExact,
			gatewayv1.QueryParamMatchRegularExpression: consulapi.HTTPQueryMatchRegularExpression,
		}[t]
		if !ok {
			return consulapi.HTTPMatch{}, fmt.Errorf("query param match type %s %s", t, consullimits.NotSupported)
		}
		out.Query = append(out.Query, consulapi.HTTPQueryMatch{Match: mt, Name: string(q.Name), Value: q.Value})
	}
	if m.Method != nil {
		method, ok := consullimits.HTTPMethod(*m.Method)
		if !ok {
			return consulapi.HTTPMatch{}, fmt.Errorf("method %s %s", *m.Method, consullimits.NotSupported)
		}
		out.Method = method
	}
	return out, nil
}

// pathMatch translates a path match; unset means PathPrefix "/" (the CRD default). The
// match is always written in full, as Consul would normalize it
// (Consul 1.15.4 agent/structs/config_entry_routes.go:114), so what Consul stores equals what was written.
func pathMatch(p *gatewayv1.HTTPPathMatch) (consulapi.HTTPPathMatch, error) {
	t, value := gatewayv1.PathMatchPathPrefix, "/"
	if p != nil && p.Type != nil {
		t = *p.Type
	}
	if p != nil && p.Value != nil {
		value = *p.Value
	}
	switch t {
	case gatewayv1.PathMatchExact:
		return consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchExact, Value: value}, nil
	case gatewayv1.PathMatchPathPrefix:
		return consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchPrefix, Value: value}, nil
	case gatewayv1.PathMatchRegularExpression:
		return consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchRegularExpression, Value: value}, nil
	}
	return consulapi.HTTPPathMatch{}, fmt.Errorf("path match type %s %s", t, consullimits.NotSupported)
}

// httpFilters translates the filters of a rule or of a backendRef. Consul 1.15 has
// request header modification and prefix rewriting; any other filter is an error
// rather than dropped, because dropping it would change what the route does.
func httpFilters(filters []gatewayv1.HTTPRouteFilter) (consulapi.HTTPFilters, error) {
	var out consulapi.HTTPFilters
	for _, f := range filters {
		switch {
		case f.Type == gatewayv1.HTTPRouteFilterRequestHeaderModifier && f.RequestHeaderModifier != nil:
			if h, ok := headerFilter(f.RequestHeaderModifier); ok {
				out.Headers = append(out.Headers, h)
			}
		case f.Type == gatewayv1.HTTPRouteFilterURLRewrite && f.URLRewrite != nil:
			rewrite, err := urlRewrite(f.URLRewrite)
			if err != nil {
				return consulapi.HTTPFilters{}, err
			}
			if rewrite != nil {
				out.URLRewrite = rewrite
			}
		default:
			return consulapi.HTTPFilters{}, fmt.Errorf("filter %s %s", f.Type, consullimits.NotSupported)
		}
	}
	return out, nil
}

// headerFilter translates a RequestHeaderModifier; ok is false when it changes nothing.
func headerFilter(h *gatewayv1.HTTPHeaderFilter) (consulapi.HTTPHeaderFilter, bool) {
	out := consulapi.HTTPHeaderFilter{Add: headerMap(h.Add), Set: headerMap(h.Set)}
	if len(h.Remove) > 0 {
		out.Remove = slices.Clone(h.Remove)
	}
	return out, out.Add != nil || out.Set != nil || out.Remove != nil
}

// headerMap turns a header list into Consul's map; nil when empty. Names are unique
// per list (the CRD's listMapKey), so nothing is lost. Values are escaped: Consul
// hands them to Envoy as they are, and Envoy reads a header value as a format in which
// "%" starts a command (consullimits.EscapeHeaderValue), where Gateway API's is literal.
func headerMap(headers []gatewayv1.HTTPHeader) map[string]string {
	if len(headers) == 0 {
		return nil
	}
	m := make(map[string]string, len(headers))
	for _, h := range headers {
		m[string(h.Name)] = consullimits.EscapeHeaderValue(h.Value)
	}
	return m
}

// urlRewrite translates a URLRewrite. Consul's URLRewrite.Path is a prefix
// replacement (Envoy prefix_rewrite), so only ReplacePrefixMatch has an equivalent.
// Path holds the replacement as the route has it; rewrittenRules turns it into the
// prefix rewrite of each match.
func urlRewrite(rw *gatewayv1.HTTPURLRewriteFilter) (*consulapi.URLRewrite, error) {
	if rw.Hostname != nil {
		return nil, fmt.Errorf("filter URLRewrite hostname %s", consullimits.NotSupported)
	}
	if rw.Path == nil {
		return nil, nil
	}
	if rw.Path.Type != gatewayv1.PrefixMatchHTTPPathModifier {
		return nil, fmt.Errorf("filter URLRewrite path type %s %s", rw.Path.Type, consullimits.NotSupported)
	}
	return &consulapi.URLRewrite{Path: ptr.Deref(rw.Path.ReplacePrefixMatch, "")}, nil
}
