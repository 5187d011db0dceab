package envoy

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// request is a request as Envoy's router matches it.
type request struct {
	path  string // without the query
	query string // after "?", "" if none
	// headers by lower-case name, pseudo-headers (":method", ":authority", ":path",
	// ":scheme") included.
	headers map[string][]string
}

// firstRoute is the first route of a virtual host that matches (route order decides,
// not specificity), or nil.
func firstRoute(vh *routev3.VirtualHost, req request) (*routev3.Route, error) {
	if vh.GetMatcher() != nil {
		return nil, fmt.Errorf("%w: virtual host %q uses a matcher tree", ErrNotModelled, vh.GetName())
	}
	for i, r := range vh.GetRoutes() {
		ok, err := routeMatches(r.GetMatch(), req)
		if err != nil {
			return nil, fmt.Errorf("virtual host %q route %d: %w", vh.GetName(), i, err)
		}
		if ok {
			return r, nil
		}
	}
	return nil, nil
}

func routeMatches(m *routev3.RouteMatch, req request) (bool, error) {
	if err := modelledRouteMatch(m); err != nil {
		return false, err
	}
	ok, err := pathMatches(m, req.path)
	if err != nil || !ok {
		return false, err
	}
	for _, h := range m.GetHeaders() {
		ok, err := headerMatches(h, req.headers)
		if err != nil || !ok {
			return false, err
		}
	}
	params := parseQuery(req.query)
	for _, q := range m.GetQueryParameters() {
		ok, err := queryMatches(q, params)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// modelledRouteMatch refuses match criteria that depend on what a request here does not
// carry (TLS details, gRPC content type rules, runtime, metadata).
func modelledRouteMatch(m *routev3.RouteMatch) error {
	switch {
	case m.GetGrpc() != nil, m.GetTlsContext() != nil, m.GetRuntimeFraction() != nil,
		len(m.GetDynamicMetadata()) > 0, len(m.GetFilterState()) > 0:
		return fmt.Errorf("%w: route match %v", ErrNotModelled, m)
	}
	return nil
}

func pathMatches(m *routev3.RouteMatch, path string) (bool, error) {
	caseSensitive := m.GetCaseSensitive() == nil || m.GetCaseSensitive().GetValue()
	fold := func(s string) string {
		if caseSensitive {
			return s
		}
		return strings.ToLower(s)
	}
	switch spec := m.GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix:
		return strings.HasPrefix(fold(path), fold(spec.Prefix)), nil
	case *routev3.RouteMatch_Path:
		return fold(path) == fold(spec.Path), nil
	case *routev3.RouteMatch_SafeRegex:
		return fullMatch(spec.SafeRegex.GetRegex(), path)
	case *routev3.RouteMatch_PathSeparatedPrefix:
		p := fold(spec.PathSeparatedPrefix)
		return fold(path) == p || strings.HasPrefix(fold(path), p+"/"), nil
	}
	return false, fmt.Errorf("%w: path specifier of %v", ErrNotModelled, m)
}

var (
	regexMu    sync.Mutex
	regexCache = map[string]*regexp.Regexp{}
)

// compileRE2 compiles an expression anchored at both ends, as Envoy's safe_regex
// matches whole values; Go's regexp implements RE2's syntax.
func compileRE2(expr string) (*regexp.Regexp, error) {
	regexMu.Lock()
	defer regexMu.Unlock()
	if re, ok := regexCache[expr]; ok {
		return re, nil
	}
	re, err := regexp.Compile("^(?:" + expr + ")$")
	if err != nil {
		return nil, fmt.Errorf("regex %q: %w", expr, err)
	}
	regexCache[expr] = re
	return re, nil
}

func fullMatch(expr, value string) (bool, error) {
	re, err := compileRE2(expr)
	if err != nil {
		return false, err
	}
	return re.MatchString(value), nil
}

// headerMatches: Envoy matches a header's values joined by "," (HeaderUtility::
// getAllOfHeaderAsString). A missing header matches no value matcher, inverted or
// not; only a presence matcher (or none, which means present) judges its absence
// (HeaderUtility::matchHeaders, source/common/http/header_utility.cc).
func headerMatches(h *routev3.HeaderMatcher, headers map[string][]string) (bool, error) {
	values, present := headers[strings.ToLower(h.GetName())]
	value := strings.Join(values, ",")
	if !present && h.GetTreatMissingHeaderAsEmpty() {
		present = true
	}
	if !present {
		switch spec := h.GetHeaderMatchSpecifier().(type) {
		case *routev3.HeaderMatcher_PresentMatch:
			return !spec.PresentMatch != h.GetInvertMatch(), nil
		case nil:
			return h.GetInvertMatch(), nil
		}
		return false, nil
	}
	ok, err := headerSpecMatches(h, value)
	if err != nil {
		return false, err
	}
	return ok != h.GetInvertMatch(), nil
}

// headerSpecMatches matches the value of a present header.
func headerSpecMatches(h *routev3.HeaderMatcher, value string) (bool, error) {
	switch spec := h.GetHeaderMatchSpecifier().(type) {
	case *routev3.HeaderMatcher_PresentMatch:
		return spec.PresentMatch, nil
	// Consul 1.15 sends the deprecated matchers; Envoy 1.25 still honours them.
	case *routev3.HeaderMatcher_ExactMatch:
		// An empty exact_match matches any value: Envoy reads it as a presence match
		// (HeaderUtility::matchHeaders: "value_.empty() || value == value_"). The
		// string_match exact below has no such exception.
		return spec.ExactMatch == "" || value == spec.ExactMatch, nil //nolint:staticcheck // see above
	case *routev3.HeaderMatcher_SafeRegexMatch:
		return fullMatch(spec.SafeRegexMatch.GetRegex(), value) //nolint:staticcheck // see above
	case *routev3.HeaderMatcher_PrefixMatch:
		return strings.HasPrefix(value, spec.PrefixMatch), nil //nolint:staticcheck // see above
	case *routev3.HeaderMatcher_SuffixMatch:
		return strings.HasSuffix(value, spec.SuffixMatch), nil //nolint:staticcheck // see above
	case *routev3.HeaderMatcher_ContainsMatch:
		return strings.Contains(value, spec.ContainsMatch), nil //nolint:staticcheck // see above
	case *routev3.HeaderMatcher_StringMatch:
		return stringMatches(spec.StringMatch, value)
	case nil:
		return true, nil
	}
	return false, fmt.Errorf("%w: header matcher %v", ErrNotModelled, h)
}

// parseQuery splits a query the way Envoy's router reads it for matching: the first
// value of a repeated name wins, a name without "=" has the value "", and names and
// values are compared as sent, not percent-decoded (RouteEntryImplBase::matchRoute
// uses Http::Utility::parseQueryString, which parses with decode_params false).
func parseQuery(query string) map[string]string {
	params := map[string]string{}
	for part := range strings.SplitSeq(query, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		if _, seen := params[k]; !seen {
			params[k] = v
		}
	}
	return params
}

func queryMatches(q *routev3.QueryParameterMatcher, params map[string]string) (bool, error) {
	value, present := params[q.GetName()]
	switch spec := q.GetQueryParameterMatchSpecifier().(type) {
	case *routev3.QueryParameterMatcher_PresentMatch:
		return present == spec.PresentMatch, nil
	case *routev3.QueryParameterMatcher_StringMatch:
		if !present {
			return false, nil
		}
		return stringMatches(spec.StringMatch, value)
	case nil:
		// No specifier: the parameter must be present.
		return present, nil
	}
	return false, fmt.Errorf("%w: query parameter matcher %v", ErrNotModelled, q)
}

func stringMatches(m *matcherv3.StringMatcher, value string) (bool, error) {
	fold := func(s string) string {
		if m.GetIgnoreCase() {
			return strings.ToLower(s)
		}
		return s
	}
	switch spec := m.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		return fold(value) == fold(spec.Exact), nil
	case *matcherv3.StringMatcher_Prefix:
		return strings.HasPrefix(fold(value), fold(spec.Prefix)), nil
	case *matcherv3.StringMatcher_Suffix:
		return strings.HasSuffix(fold(value), fold(spec.Suffix)), nil
	case *matcherv3.StringMatcher_Contains:
		return strings.Contains(fold(value), fold(spec.Contains)), nil
	case *matcherv3.StringMatcher_SafeRegex:
		// ignore_case has no effect on regexes.
		return fullMatch(spec.SafeRegex.GetRegex(), value)
	}
	return false, fmt.Errorf("%w: string matcher %v", ErrNotModelled, m)
}
