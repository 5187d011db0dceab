package envoy

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// Request is an HTTP request as Envoy's router sees it.
type Request struct {
	Method string
	// Host is the Host header (":authority"), possibly with a port.
	Host string
	// Target is the path with an optional query.
	Target  string
	Headers map[string]string
}

func (r Request) String() string {
	var hs []string
	for k, v := range r.Headers {
		hs = append(hs, k+": "+v)
	}
	slices.Sort(hs)
	s := fmt.Sprintf("%s %s%s", r.method(), r.Host, r.Target)
	if len(hs) > 0 {
		s += " [" + strings.Join(hs, ", ") + "]"
	}
	return s
}

func (r Request) method() string {
	if r.Method == "" {
		return "GET"
	}
	return r.Method
}

// Routed is where Envoy's router sends a request: the clusters with their weights, and
// the request as the backend receives it.
type Routed struct {
	// Clusters maps each cluster to its weight; one cluster has weight 1.
	Clusters map[string]uint32
	// Path is the path after any rewrite.
	Path string
	// Headers are the request headers after the route's mutations (lower-case names).
	Headers map[string]string
	// Cluster-specific header mutations of weighted clusters are not applied here.
}

// Route returns what a route configuration does with a request, the way Envoy's router
// picks: the virtual host by domain (exact, then the longest suffix wildcard, then the
// longest prefix wildcard, then "*"), then the first route of it that matches. ok is
// false when no route matches (Envoy answers 404).
func Route(rc *routev3.RouteConfiguration, req Request) (Routed, bool, error) {
	vh := virtualHost(rc.GetVirtualHosts(), strings.ToLower(req.Host))
	if vh == nil {
		return Routed{}, false, nil
	}
	path, query, _ := strings.Cut(req.Target, "?")
	params, err := url.ParseQuery(query)
	if err != nil {
		return Routed{}, false, fmt.Errorf("query of %s: %w", req.Target, err)
	}
	headers := map[string]string{":method": req.method(), ":authority": req.Host, ":path": req.Target}
	for k, v := range req.Headers {
		headers[strings.ToLower(k)] = v
	}
	for _, r := range vh.GetRoutes() {
		ok, err := routeMatches(r.GetMatch(), path, params, headers)
		if err != nil {
			return Routed{}, false, fmt.Errorf("virtual host %s: %w", vh.GetName(), err)
		}
		if !ok {
			continue
		}
		return routed(rc, vh, r, path, headers)
	}
	return Routed{}, false, nil
}

func virtualHost(hosts []*routev3.VirtualHost, host string) *routev3.VirtualHost {
	var best *routev3.VirtualHost
	bestRank, bestLen := 0, -1
	for _, vh := range hosts {
		for _, d := range vh.GetDomains() {
			rank, n := domainMatch(strings.ToLower(d), host)
			if rank > bestRank || (rank == bestRank && rank > 0 && n > bestLen) {
				best, bestRank, bestLen = vh, rank, n
			}
		}
	}
	return best
}

// domainMatch ranks how a virtual host domain matches a host: 4 exact, 3 suffix
// wildcard ("*.example.com"), 2 prefix wildcard ("example.*"), 1 "*", 0 no match; n is
// the length of the domain, longer wins within a rank.
func domainMatch(domain, host string) (rank, n int) {
	switch {
	case domain == host:
		return 4, len(domain)
	case domain == "*":
		return 1, 0
	case strings.HasPrefix(domain, "*") && strings.HasSuffix(host, domain[1:]) && len(host) > len(domain)-1:
		return 3, len(domain)
	case strings.HasSuffix(domain, "*") && strings.HasPrefix(host, domain[:len(domain)-1]) && len(host) > len(domain)-1:
		return 2, len(domain)
	}
	return 0, 0
}

func routeMatches(m *routev3.RouteMatch, path string, params url.Values, headers map[string]string) (bool, error) {
	ok, err := pathMatches(m, path)
	if err != nil || !ok {
		return false, err
	}
	for _, h := range m.GetHeaders() {
		ok, err := headerMatches(h, headers)
		if err != nil || !ok {
			return false, err
		}
	}
	for _, q := range m.GetQueryParameters() {
		ok, err := queryMatches(q, params)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
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
	return false, fmt.Errorf("route match %v: path specifier not understood", m)
}

// fullMatch is RE2 matching the whole value, as Envoy's safe_regex does.
func fullMatch(expr, value string) (bool, error) {
	re, err := regexp.Compile("^(?:" + expr + ")$")
	if err != nil {
		return false, fmt.Errorf("regex %q: %w", expr, err)
	}
	return re.MatchString(value), nil
}

func headerMatches(h *routev3.HeaderMatcher, headers map[string]string) (bool, error) {
	value, present := headers[strings.ToLower(h.GetName())]
	ok, err := func() (bool, error) {
		switch spec := h.GetHeaderMatchSpecifier().(type) {
		case *routev3.HeaderMatcher_PresentMatch:
			return present == spec.PresentMatch, nil
		// Consul 1.15 sends the deprecated matchers; Envoy 1.25 still honours them.
		case *routev3.HeaderMatcher_ExactMatch:
			return present && value == spec.ExactMatch, nil //nolint:staticcheck // see above
		case *routev3.HeaderMatcher_SafeRegexMatch:
			if !present {
				return false, nil
			}
			return fullMatch(spec.SafeRegexMatch.GetRegex(), value) //nolint:staticcheck // see above
		case *routev3.HeaderMatcher_PrefixMatch:
			return present && strings.HasPrefix(value, spec.PrefixMatch), nil //nolint:staticcheck // see above
		case *routev3.HeaderMatcher_SuffixMatch:
			return present && strings.HasSuffix(value, spec.SuffixMatch), nil //nolint:staticcheck // see above
		case *routev3.HeaderMatcher_StringMatch:
			if !present {
				return false, nil
			}
			return stringMatches(spec.StringMatch, value)
		case nil:
			return present, nil
		}
		return false, fmt.Errorf("header matcher %v not understood", h)
	}()
	if err != nil {
		return false, err
	}
	return ok != h.GetInvertMatch(), nil
}

func queryMatches(q *routev3.QueryParameterMatcher, params url.Values) (bool, error) {
	values, present := params[q.GetName()]
	switch spec := q.GetQueryParameterMatchSpecifier().(type) {
	case *routev3.QueryParameterMatcher_PresentMatch:
		return present == spec.PresentMatch, nil
	case *routev3.QueryParameterMatcher_StringMatch:
		if !present {
			return false, nil
		}
		// Envoy matches the first value of a repeated parameter.
		return stringMatches(spec.StringMatch, values[0])
	}
	return false, fmt.Errorf("query parameter matcher %v not understood", q)
}

func stringMatches(m *matcherv3.StringMatcher, value string) (bool, error) {
	if m.GetIgnoreCase() {
		value = strings.ToLower(value)
	}
	fold := func(s string) string {
		if m.GetIgnoreCase() {
			return strings.ToLower(s)
		}
		return s
	}
	switch spec := m.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		return value == fold(spec.Exact), nil
	case *matcherv3.StringMatcher_Prefix:
		return strings.HasPrefix(value, fold(spec.Prefix)), nil
	case *matcherv3.StringMatcher_Suffix:
		return strings.HasSuffix(value, fold(spec.Suffix)), nil
	case *matcherv3.StringMatcher_Contains:
		return strings.Contains(value, fold(spec.Contains)), nil
	case *matcherv3.StringMatcher_SafeRegex:
		return fullMatch(spec.SafeRegex.GetRegex(), value)
	}
	return false, fmt.Errorf("string matcher %v not understood", m)
}

// routed applies the matched route: its clusters, its prefix rewrite, and the request
// header mutations of the route configuration, the virtual host and the route.
func routed(rc *routev3.RouteConfiguration, vh *routev3.VirtualHost, r *routev3.Route, path string, headers map[string]string) (Routed, bool, error) {
	action := r.GetRoute()
	if action == nil {
		return Routed{}, false, fmt.Errorf("route %v: only route actions are understood", r.GetMatch())
	}
	out := Routed{Clusters: map[string]uint32{}, Path: path, Headers: map[string]string{}}
	switch spec := action.GetClusterSpecifier().(type) {
	case *routev3.RouteAction_Cluster:
		out.Clusters[spec.Cluster] = 1
	case *routev3.RouteAction_WeightedClusters:
		for _, c := range spec.WeightedClusters.GetClusters() {
			out.Clusters[c.GetName()] += c.GetWeight().GetValue()
		}
	default:
		return Routed{}, false, fmt.Errorf("route %v: cluster specifier not understood", r.GetMatch())
	}
	if rw := action.GetPrefixRewrite(); rw != "" {
		prefix := r.GetMatch().GetPrefix()
		if prefix == "" {
			prefix = r.GetMatch().GetPath()
		}
		out.Path = rw + path[len(prefix):]
	}
	if action.GetRegexRewrite() != nil {
		return Routed{}, false, fmt.Errorf("route %v: regex rewrite not understood", r.GetMatch())
	}
	for k, v := range headers {
		if !strings.HasPrefix(k, ":") {
			out.Headers[k] = v
		}
	}
	// Envoy applies the most specific level last: route, then virtual host, then route
	// configuration, unless told otherwise; Consul sets them on one level only.
	for _, level := range []struct {
		add    []*corev3.HeaderValueOption
		remove []string
	}{
		{r.GetRequestHeadersToAdd(), r.GetRequestHeadersToRemove()},
		{vh.GetRequestHeadersToAdd(), vh.GetRequestHeadersToRemove()},
		{rc.GetRequestHeadersToAdd(), rc.GetRequestHeadersToRemove()},
	} {
		mutateHeaders(out.Headers, level.add, level.remove)
	}
	return out, true, nil
}

// mutateHeaders applies one level's mutations as Envoy does: removals, then additions.
func mutateHeaders(headers map[string]string, add []*corev3.HeaderValueOption, remove []string) {
	for _, name := range remove {
		delete(headers, strings.ToLower(name))
	}
	for _, o := range add {
		name := strings.ToLower(o.GetHeader().GetKey())
		value := o.GetHeader().GetValue()
		old, exists := headers[name]
		action := o.GetAppendAction()
		if o.GetAppend() != nil { //nolint:staticcheck // Consul 1.15 sets the deprecated field.
			action = corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
			if o.GetAppend().GetValue() { //nolint:staticcheck // as above
				action = corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD
			}
		}
		switch {
		case action == corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD && exists:
			headers[name] = old + "," + value
		case action == corev3.HeaderValueOption_ADD_IF_ABSENT && exists:
		case action == corev3.HeaderValueOption_OVERWRITE_IF_EXISTS && !exists:
		default:
			headers[name] = value
		}
	}
}
