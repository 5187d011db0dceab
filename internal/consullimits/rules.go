package consullimits

import (
	"fmt"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/directive"
)

// The checkers below are the one account of which Gateway API rules Consul can
// program. The status pipeline refuses a rule they find a problem with; the
// translation writes every other rule as it is, trusting that decision.

// HTTPRuleProblem says why Consul (per caps) cannot program rule exactly, or "" when
// it can. Unsupported features are reported, never silently dropped: the spec requires
// a rule an implementation cannot honour to be refused, and dropping a filter would
// change what the route does. The message names the rule index and the field, e.g.
// "filter RequestRedirect is not supported by Consul's API gateway"; the caller adds
// which rule.
//
// The rule name is allowed: it only labels the rule for status and policies and
// changes no traffic. BackendRef weights are allowed: Consul splits by weight, though
// its Normalize turns a weight of 0 into 1 (Consul 1.15.4 agent/structs/config_entry_routes.go:107-109), so whoever
// writes the entry must leave weight-0 backends out rather than pass 0.
func HTTPRuleProblem(rule gatewayv1.HTTPRouteRule, caps Capabilities) string {
	if msg := HTTPMatchesProblem(rule.Matches); msg != "" {
		return msg
	}
	for _, f := range rule.Filters {
		if msg := ruleFilterProblem(f, rule, caps); msg != "" {
			return msg
		}
	}
	for b, ref := range rule.BackendRefs {
		for _, f := range ref.Filters {
			if msg := backendFilterProblem(b, f, rule, caps); msg != "" {
				return msg
			}
		}
	}
	return httpRuleFeatureProblem(rule, caps)
}

// TCPRuleProblem says why Consul (per caps) cannot program the TCP rule exactly, or ""
// when it can.
// Consul 1.15's tcp-route forwards to at most one service and has no weights, so a rule
// may send traffic to one backend only. A backendRef with weight 0 receives no
// connections per the spec, so it is left out of the count: whoever writes the entry
// omits it, and the route still does what it says.
func TCPRuleProblem(rule gatewayv1.TCPRouteRule, caps Capabilities) string {
	if caps.TCPWeightedBackends {
		return ""
	}
	if n := trafficBackends(rule.BackendRefs); n > 1 {
		return fmt.Sprintf("backendRefs: %d backends would receive traffic, but Consul's tcp-route forwards to a single service", n)
	}
	return ""
}

// trafficBackends counts backendRefs that receive traffic: weight unset means 1.
func trafficBackends(refs []gatewayv1.BackendRef) int {
	n := 0
	for _, ref := range refs {
		if ref.Weight == nil || *ref.Weight > 0 {
			n++
		}
	}
	return n
}

// HTTPMatchesProblem checks every match of a rule; "" means Consul can match them
// as written.
func HTTPMatchesProblem(matches []gatewayv1.HTTPRouteMatch) string {
	for m, match := range matches {
		if msg := httpMatchProblem(match); msg != "" {
			return fmt.Sprintf("match %d %s", m, msg)
		}
	}
	return ""
}

// httpMatchProblem checks one match against Consul's HTTPMatch: path exact, prefix or
// regex; header exact or regex (Consul has more, Gateway API has only these); query
// exact or regex; one method. Unset types take the CRD defaults. Regexes must compile
// as RE2, or Envoy would refuse the gateway's routes (RegexProblem).
func httpMatchProblem(match gatewayv1.HTTPRouteMatch) string {
	if match.Path != nil && match.Path.Type != nil {
		switch *match.Path.Type {
		case gatewayv1.PathMatchExact, gatewayv1.PathMatchPathPrefix:
		case gatewayv1.PathMatchRegularExpression:
			if msg := regexProblem(match.Path.Value); msg != "" {
				return "path " + msg
			}
		default:
			return fmt.Sprintf("path type %s %s", *match.Path.Type, NotSupported)
		}
	}
	for _, h := range match.Headers {
		if problem := headerNameProblem(string(h.Name)); problem != "" {
			return envoyRefused("header match", problem)
		}
		if h.Type != nil && *h.Type != gatewayv1.HeaderMatchExact && *h.Type != gatewayv1.HeaderMatchRegularExpression {
			return fmt.Sprintf("header %s match type %s %s", h.Name, *h.Type, NotSupported)
		}
		if h.Type != nil && *h.Type == gatewayv1.HeaderMatchRegularExpression {
			if msg := regexProblem(&h.Value); msg != "" {
				return fmt.Sprintf("header %s %s", h.Name, msg)
			}
		}
	}
	for _, q := range match.QueryParams {
		if problem := queryParamNameProblem(string(q.Name)); problem != "" {
			return envoyRefused("query param match", problem)
		}
		if q.Type != nil && *q.Type != gatewayv1.QueryParamMatchExact && *q.Type != gatewayv1.QueryParamMatchRegularExpression {
			return fmt.Sprintf("query param %s match type %s %s", q.Name, *q.Type, NotSupported)
		}
		if q.Type != nil && *q.Type == gatewayv1.QueryParamMatchRegularExpression {
			if msg := regexProblem(&q.Value); msg != "" {
				return fmt.Sprintf("query param %s %s", q.Name, msg)
			}
		}
	}
	if match.Method != nil {
		if _, ok := HTTPMethod(*match.Method); !ok {
			return fmt.Sprintf("method %s %s", *match.Method, NotSupported)
		}
	}
	return ""
}

// regexProblem checks a regex match value; unset is the CRD default "/", a valid one.
func regexProblem(value *string) string {
	if value == nil {
		return ""
	}
	return RegexProblem(*value)
}

// ruleFilterProblem checks one rule-level filter.
func ruleFilterProblem(f gatewayv1.HTTPRouteFilter, rule gatewayv1.HTTPRouteRule, caps Capabilities) string {
	switch f.Type {
	case gatewayv1.HTTPRouteFilterRequestHeaderModifier:
		return headerFilterProblem("filter RequestHeaderModifier", f.RequestHeaderModifier)
	case gatewayv1.HTTPRouteFilterResponseHeaderModifier:
		if caps.ResponseHeaderModifier {
			return ""
		}
	case gatewayv1.HTTPRouteFilterURLRewrite:
		return urlRewriteProblem("filter URLRewrite", f.URLRewrite, rule.Matches, caps)
	case gatewayv1.HTTPRouteFilterRequestRedirect:
		if caps.RequestRedirect {
			return redirectProblem(f.RequestRedirect, rule.Matches)
		}
	}
	return fmt.Sprintf("filter %s %s", f.Type, NotSupported)
}

// backendFilterProblem checks one filter on backendRef b. Consul applies per-service
// headers in every case, but a per-service URLRewrite only when the rule has a single
// service, and it then replaces the rule's rewrite instead of following it.
func backendFilterProblem(b int, f gatewayv1.HTTPRouteFilter, rule gatewayv1.HTTPRouteRule, caps Capabilities) string {
	where := fmt.Sprintf("backendRef %d filter %s", b, f.Type)
	switch f.Type {
	case gatewayv1.HTTPRouteFilterRequestHeaderModifier:
		return headerFilterProblem(where, f.RequestHeaderModifier)
	case gatewayv1.HTTPRouteFilterResponseHeaderModifier:
		if caps.ResponseHeaderModifier {
			return ""
		}
	case gatewayv1.HTTPRouteFilterURLRewrite:
		if !caps.SingleBackendURLRewrite {
			break
		}
		if len(rule.BackendRefs) != 1 {
			return where + " needs the rule to have exactly one backendRef: Consul ignores a per-service rewrite on a traffic split"
		}
		if hasFilter(rule.Filters, gatewayv1.HTTPRouteFilterURLRewrite) {
			return where + " cannot follow a rule-level URLRewrite: Consul would apply only one of them"
		}
		return urlRewriteProblem(where, f.URLRewrite, rule.Matches, caps)
	}
	return where + " " + NotSupported
}

// urlRewriteProblem checks a URLRewrite filter found at where. ReplacePrefixMatch maps
// to Consul's prefix rewrite; the spec only allows it with exactly one PathPrefix match
// (HTTPRouteRule XValidation), which the API server enforces, but objects that skipped
// validation must not turn into a rewrite Consul applies to the wrong path.
func urlRewriteProblem(where string, rw *gatewayv1.HTTPURLRewriteFilter, matches []gatewayv1.HTTPRouteMatch, caps Capabilities) string {
	if rw == nil {
		return ""
	}
	if rw.Hostname != nil && !caps.HostnameRewrite {
		return where + " hostname " + NotSupported
	}
	if rw.Path == nil {
		return ""
	}
	switch rw.Path.Type {
	case gatewayv1.PrefixMatchHTTPPathModifier:
		if !singlePathPrefixMatch(matches) {
			return where + " ReplacePrefixMatch needs exactly one PathPrefix match"
		}
		if rw.Path.ReplacePrefixMatch != nil {
			if problem := prefixRewriteProblem(*rw.Path.ReplacePrefixMatch); problem != "" {
				return envoyRefused(where+" ReplacePrefixMatch", problem)
			}
		}
		return ""
	case gatewayv1.FullPathHTTPPathModifier:
		if caps.FullPathRewrite {
			return ""
		}
	}
	return fmt.Sprintf("%s path type %s %s", where, rw.Path.Type, NotSupported)
}

// redirectProblem checks a RequestRedirect filter against what the responder
// answers: the schemes and status codes Gateway API v1.6.3 allows (values may be
// added to both enums, and an unknown one must be refused), and ReplacePrefixMatch
// only with exactly one PathPrefix match, whose prefix it replaces.
func redirectProblem(r *gatewayv1.HTTPRequestRedirectFilter, matches []gatewayv1.HTTPRouteMatch) string {
	const where = "filter RequestRedirect"
	if r == nil {
		return ""
	}
	if _, ok := directive.Schemes[deref(r.Scheme)]; r.Scheme != nil && !ok {
		return fmt.Sprintf("%s scheme %q %s", where, *r.Scheme, NotSupported)
	}
	if r.StatusCode != nil && !directive.StatusCodes[*r.StatusCode] {
		return fmt.Sprintf("%s statusCode %d %s", where, *r.StatusCode, NotSupported)
	}
	if r.Path == nil {
		return ""
	}
	switch r.Path.Type {
	case gatewayv1.FullPathHTTPPathModifier:
		return ""
	case gatewayv1.PrefixMatchHTTPPathModifier:
		if !singlePathPrefixMatch(matches) {
			return where + " ReplacePrefixMatch needs exactly one PathPrefix match"
		}
		return ""
	}
	return fmt.Sprintf("%s path type %s %s", where, r.Path.Type, NotSupported)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// singlePathPrefixMatch reports whether matches is exactly one PathPrefix match, with
// the CRD defaults applied: no matches means one PathPrefix "/" match, and a match
// without path or path type is a PathPrefix match.
func singlePathPrefixMatch(matches []gatewayv1.HTTPRouteMatch) bool {
	if len(matches) == 0 {
		return true
	}
	if len(matches) > 1 {
		return false
	}
	path := matches[0].Path
	return path == nil || path.Type == nil || *path.Type == gatewayv1.PathMatchPathPrefix
}

// hasFilter reports whether filters holds one of type t.
func hasFilter(filters []gatewayv1.HTTPRouteFilter, t gatewayv1.HTTPRouteFilterType) bool {
	for _, f := range filters {
		if f.Type == t {
			return true
		}
	}
	return false
}

// httpRuleFeatureProblem checks the rule-level features that are not filters. Timeouts
// with neither field set ask for nothing; a retry stanza asks for retries on connection
// errors even when empty, so any retry counts.
func httpRuleFeatureProblem(rule gatewayv1.HTTPRouteRule, caps Capabilities) string {
	if t := rule.Timeouts; t != nil && (t.Request != nil || t.BackendRequest != nil) && !caps.RequestTimeouts {
		return "timeouts " + NotSupported
	}
	if rule.Retry != nil && !caps.RetryPolicy {
		return "retry " + NotSupported
	}
	if rule.SessionPersistence != nil && !caps.SessionPersistence {
		return "sessionPersistence " + NotSupported
	}
	return ""
}
