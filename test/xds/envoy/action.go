package envoy

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
)

// defaultRouteTimeout is RouteAction.timeout's default (route_components.proto).
const defaultRouteTimeout = 15 * time.Second

// answer carries out a matched route's action.
func (c *Config) answer(rc *routev3.RouteConfiguration, vh *routev3.VirtualHost, r *routev3.Route, d request, router *routerv3.Router, rnd *rand.Rand) (HTTPAnswer, error) {
	switch a := r.GetAction().(type) {
	case *routev3.Route_Route:
		return c.forward(mutationLevels{rc, vh, r, nil}, a.Route, d, router, rnd)
	case *routev3.Route_DirectResponse:
		return directResponse(mutationLevels{rc, vh, r, nil}, a.DirectResponse)
	case *routev3.Route_Redirect:
		return HTTPAnswer{}, fmt.Errorf("%w: redirect action of route %q in virtual host %q", ErrNotModelled, r.GetName(), vh.GetName())
	}
	return HTTPAnswer{}, fmt.Errorf("%w: action %T of route %q", ErrNotModelled, r.GetAction(), r.GetName())
}

// forward sends the request to a cluster: it picks the cluster, rewrites and mutates
// the request as the route says, and picks an endpoint.
func (c *Config) forward(levels mutationLevels, a *routev3.RouteAction, d request, router *routerv3.Router, rnd *rand.Rand) (HTTPAnswer, error) {
	if err := modelledAction(a); err != nil {
		return HTTPAnswer{}, err
	}
	cluster, wc := pickCluster(a, rnd)
	levels.cluster = wc
	ans := HTTPAnswer{Cluster: cluster}
	var err error
	if ans.ResponseHeaders, ans.RemovedResponseHeaders, err = levels.response(levels.mostSpecificWins()); err != nil {
		return HTTPAnswer{}, err
	}
	// The router answers for a cluster it does not know with the route's
	// cluster_not_found_response_code (503 unless set), and without a healthy host with
	// 503. (source/common/router/router.cc, Filter::decodeHeaders)
	if c.Clusters[cluster] == nil {
		ans.Status = clusterNotFoundStatus(a.GetClusterNotFoundResponseCode())
		return ans, nil
	}
	endpoint, ok, err := c.pickEndpoint(cluster, rnd)
	if err != nil {
		return HTTPAnswer{}, err
	}
	if !ok {
		ans.Status = 503
		return ans, nil
	}
	up, err := upstreamRequest(levels, a, d, router)
	if err != nil {
		return HTTPAnswer{}, err
	}
	ans.Status, ans.Endpoint = 200, endpoint
	ans.Method, ans.Host, ans.Path = first(up.headers[":method"]), first(up.headers[":authority"]), first(up.headers[":path"])
	ans.Headers = withoutPseudo(up.headers)
	return ans, nil
}

// modelledAction refuses what would pick clusters or change requests in ways not
// reproduced here.
func modelledAction(a *routev3.RouteAction) error {
	var unmodelled []string
	switch a.GetClusterSpecifier().(type) {
	case *routev3.RouteAction_Cluster, *routev3.RouteAction_WeightedClusters:
	default:
		unmodelled = append(unmodelled, fmt.Sprintf("cluster specifier %T", a.GetClusterSpecifier()))
	}
	if a.GetHostRewriteSpecifier() != nil {
		if _, literal := a.GetHostRewriteSpecifier().(*routev3.RouteAction_HostRewriteLiteral); !literal {
			unmodelled = append(unmodelled, fmt.Sprintf("host rewrite %T", a.GetHostRewriteSpecifier()))
		}
	}
	if len(a.GetRequestMirrorPolicies()) > 0 {
		unmodelled = append(unmodelled, "request mirroring")
	}
	if a.GetMetadataMatch() != nil {
		unmodelled = append(unmodelled, "metadata_match (subset load balancing)")
	}
	for _, wc := range a.GetWeightedClusters().GetClusters() {
		if wc.GetClusterHeader() != "" || wc.GetMetadataMatch() != nil {
			unmodelled = append(unmodelled, "weighted cluster "+wc.GetName()+" by header or metadata")
		}
	}
	if a.GetWeightedClusters().GetHeaderName() != "" {
		unmodelled = append(unmodelled, "weighted cluster choice by header")
	}
	if len(unmodelled) > 0 {
		return fmt.Errorf("%w: %s", ErrNotModelled, strings.Join(unmodelled, ", "))
	}
	return nil
}

// pickCluster is the route's cluster, or one of its weighted clusters chosen by weight.
func pickCluster(a *routev3.RouteAction, rnd *rand.Rand) (string, *routev3.WeightedCluster_ClusterWeight) {
	if a.GetCluster() != "" {
		return a.GetCluster(), nil
	}
	wc := pickWeighted(a.GetWeightedClusters().GetClusters(), func(c *routev3.WeightedCluster_ClusterWeight) uint64 {
		return uint64(c.GetWeight().GetValue())
	}, rnd)
	return wc.GetName(), wc
}

func clusterNotFoundStatus(code routev3.RouteAction_ClusterNotFoundResponseCode) int {
	switch code {
	case routev3.RouteAction_NOT_FOUND:
		return 404
	case routev3.RouteAction_INTERNAL_SERVER_ERROR:
		return 500
	}
	return 503
}

// mutationLevels are the places header mutations come from, least specific first.
type mutationLevels struct {
	rc      *routev3.RouteConfiguration
	vh      *routev3.VirtualHost
	route   *routev3.Route
	cluster *routev3.WeightedCluster_ClusterWeight // the picked weighted cluster, if any
}

func (l mutationLevels) mostSpecificWins() bool { return l.rc.GetMostSpecificHeaderMutationsWins() }

// parents are route, virtual host and route configuration in the order Envoy applies
// them: by default the most specific first, so that the route configuration's
// mutations, applied last, win; with most_specific_header_mutations_wins the reverse.
// (config_impl.cc, RouteEntryImplBase::finalizeRequestHeaders and getHeaderParsers)
func (l mutationLevels) parents(mostSpecificWins bool) []headerLevel {
	levels := []headerLevel{l.route, l.vh, l.rc}
	if mostSpecificWins {
		slices.Reverse(levels)
	}
	return levels
}

// response applies the response mutations to an empty response: a picked weighted
// cluster's own first, then the parents'. (config_impl.cc, WeightedClusterEntry::
// finalizeResponseHeaders)
func (l mutationLevels) response(mostSpecificWins bool) (map[string][]string, []string, error) {
	headers := map[string][]string{}
	var removed []string
	levels := l.parents(mostSpecificWins)
	if l.cluster != nil {
		levels = append([]headerLevel{l.cluster}, levels...)
	}
	for _, level := range levels {
		r, err := responseOps(level).apply(headers)
		if err != nil {
			return nil, nil, err
		}
		removed = append(removed, r...)
	}
	slices.Sort(removed)
	return headers, slices.Compact(removed), nil
}

// upstreamRequest is the request the backend receives: the picked weighted cluster's
// mutations and host rewrite, then the parents' mutations, the route's host rewrite and
// path rewrite, then the router's own headers. (config_impl.cc, WeightedClusterEntry::
// finalizeRequestHeaders, RouteEntryImplBase::finalizeRequestHeaders; router.cc)
func upstreamRequest(levels mutationLevels, a *routev3.RouteAction, d request, router *routerv3.Router) (request, error) {
	up := request{path: d.path, query: d.query, headers: cloneHeaders(d.headers)}
	if wc := levels.cluster; wc != nil {
		if _, err := requestOps(wc).apply(up.headers); err != nil {
			return request{}, err
		}
		if h := wc.GetHostRewriteLiteral(); h != "" {
			up.headers[":authority"] = []string{h}
		}
	}
	for _, level := range levels.parents(levels.mostSpecificWins()) {
		if _, err := requestOps(level).apply(up.headers); err != nil {
			return request{}, err
		}
	}
	if h := a.GetHostRewriteLiteral(); h != "" {
		up.headers[":authority"] = []string{h}
	}
	if err := rewritePath(&up, levels.route.GetMatch(), a, !router.GetSuppressEnvoyHeaders()); err != nil {
		return request{}, err
	}
	if !router.GetSuppressEnvoyHeaders() {
		if ms := expectedTimeoutMs(a); ms > 0 {
			up.headers["x-envoy-expected-rq-timeout-ms"] = []string{strconv.FormatInt(ms, 10)}
		}
	}
	return up, nil
}

// expectedTimeoutMs is the timeout the router announces upstream: the per-try timeout
// if the retry policy sets a shorter one, else the route's timeout (15 s by default);
// 0 means none. (router.cc, FilterUtility::finalTimeout)
func expectedTimeoutMs(a *routev3.RouteAction) int64 {
	timeout := defaultRouteTimeout
	if t := a.GetTimeout(); t != nil {
		timeout = t.AsDuration()
	}
	if pt := a.GetRetryPolicy().GetPerTryTimeout(); pt != nil && pt.AsDuration() > 0 && (timeout == 0 || pt.AsDuration() < timeout) {
		timeout = pt.AsDuration()
	}
	return timeout.Milliseconds()
}

// rewritePath applies prefix_rewrite (replacing what the match matched: the prefix, or
// the whole path for path and regex matches) or regex_rewrite (on the path, not the
// query), and records the original path in x-envoy-original-path.
// (config_impl.cc, RouteEntryImplBase::finalizePathHeader and rewritePathByRegex)
func rewritePath(up *request, m *routev3.RouteMatch, a *routev3.RouteAction, recordOriginal bool) error {
	original := first(up.headers[":path"])
	switch {
	case a.GetPrefixRewrite() != "":
		matched := len(up.path)
		switch spec := m.GetPathSpecifier().(type) {
		case *routev3.RouteMatch_Prefix:
			matched = len(spec.Prefix)
		case *routev3.RouteMatch_PathSeparatedPrefix:
			matched = len(spec.PathSeparatedPrefix)
		}
		up.path = a.GetPrefixRewrite() + up.path[matched:]
	case a.GetRegexRewrite() != nil:
		path, err := regexRewrite(up.path, a.GetRegexRewrite().GetPattern().GetRegex(), a.GetRegexRewrite().GetSubstitution())
		if err != nil {
			return err
		}
		up.path = path
	default:
		return nil
	}
	target := up.path
	if up.query != "" {
		target += "?" + up.query
	}
	up.headers[":path"] = []string{target}
	if recordOriginal {
		up.headers["x-envoy-original-path"] = []string{original}
	}
	return nil
}

// re2Backref is RE2's "\N" reference to a group in a substitution.
var re2Backref = regexp.MustCompile(`\\([0-9\\])`)

// regexRewrite replaces every match of expr (unanchored, as RE2::GlobalReplace does)
// with the substitution, translated from RE2's "\1" to Go's "${1}".
func regexRewrite(path, expr, substitution string) (string, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return "", fmt.Errorf("regex_rewrite %q: %w", expr, err)
	}
	repl := re2Backref.ReplaceAllStringFunc(strings.ReplaceAll(substitution, "$", "$$"), func(m string) string {
		if m == `\\` {
			return `\`
		}
		return "${" + m[1:] + "}"
	})
	return re.ReplaceAllString(path, repl), nil
}

// directResponse answers with the route's literal status and body; the response
// header mutations apply to it.
func directResponse(levels mutationLevels, dr *routev3.DirectResponseAction) (HTTPAnswer, error) {
	body := dr.GetBody()
	var text string
	switch {
	case body == nil:
	case body.GetFilename() != "" || body.GetEnvironmentVariable() != "":
		return HTTPAnswer{}, fmt.Errorf("%w: direct response body from a file or the environment", ErrNotModelled)
	case body.GetInlineString() != "":
		text = body.GetInlineString()
	default:
		text = string(body.GetInlineBytes())
	}
	headers, removed, err := levels.response(levels.mostSpecificWins())
	if err != nil {
		return HTTPAnswer{}, err
	}
	return HTTPAnswer{Status: int(dr.GetStatus()), Body: text, ResponseHeaders: headers, RemovedResponseHeaders: removed}, nil
}

func cloneHeaders(h map[string][]string) map[string][]string {
	out := make(map[string][]string, len(h))
	for k, v := range h {
		out[k] = slices.Clone(v)
	}
	return out
}

func withoutPseudo(h map[string][]string) map[string][]string {
	out := maps.Clone(h)
	maps.DeleteFunc(out, func(k string, _ []string) bool { return strings.HasPrefix(k, ":") })
	return out
}
