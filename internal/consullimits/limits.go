// Package consullimits is the one account of what Consul's API gateway config entries
// can express: the status pipeline refuses what is not in it, and the Consul translation
// writes what is. A feature becomes servable by changing it here and teaching the
// translation to write it, never one without the other (see consul/translate's
// TestTranslationExpressesCapabilities).
package consullimits

import (
	"fmt"
	"regexp"
	"strings"

	consulapi "github.com/hashicorp/consul/api"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Capabilities says what the connected Consul can express. Consul115 is Consul 1.15's
// set. Each field is a Gateway API feature that some Consul releases can program and
// others cannot, or that the responder answers in Consul's stead (RequestRedirect);
// what no Consul API gateway can express (RequestMirror, CORS, ExternalAuth,
// ExtensionRef) is refused outright.
type Capabilities struct {
	// ResponseHeaderModifier: response header filters on http-route, at rule and
	// backendRef level.
	ResponseHeaderModifier bool
	// FullPathRewrite: URLRewrite with ReplaceFullPath.
	FullPathRewrite bool
	// HostnameRewrite: URLRewrite with a hostname (Host header rewrite).
	HostnameRewrite bool
	// RequestTimeouts: HTTPRouteRule.Timeouts (request and backendRequest).
	RequestTimeouts bool
	// RetryPolicy: HTTPRouteRule.Retry.
	RetryPolicy bool
	// SessionPersistence: HTTPRouteRule.SessionPersistence.
	SessionPersistence bool
	// SingleBackendURLRewrite: a URLRewrite filter on a backendRef, honoured only when
	// the rule has exactly one backendRef and no rule-level URLRewrite.
	SingleBackendURLRewrite bool
	// TCPWeightedBackends: a tcp-route spreading connections over several services by
	// weight. Without it a TCP rule may send traffic to one backend only.
	TCPWeightedBackends bool
	// RequestRedirect: a rule-level RequestRedirect filter. No Consul http-route can
	// express one; the responder answers it (the controller's --responder-service),
	// the rule forwarding to it with the redirect in a request header.
	RequestRedirect bool
	// responder: the requests of rules without a valid backend go to the responder,
	// which answers them as the spec asks (RefusedStatus). Not a feature of routes, so
	// not exported: the capability tests judge each exported field as one.
	responder bool
}

// Consul115 is what Consul 1.15.4's API gateway config entries can express
// (agent/structs/config_entry_routes.go and agent/consul/discoverychain/gateway_httproute.go):
//
//   - http-route filters are HTTPFilters{Headers, URLRewrite} (config_entry_routes.go:416-419),
//     and the headers are applied as request headers only (gateway_httproute.go:99, 115, 139):
//     no response header modifier.
//   - URLRewrite holds only Path (config_entry_routes.go:428-430), used as the Envoy
//     prefix_rewrite (gateway_httproute.go:178-183): a prefix replacement, no full-path
//     replacement, no hostname.
//   - HTTPRouteRule holds Filters, Matches and Services only (config_entry_routes.go:434-445):
//     no timeouts, retries or session persistence, although the service-router the
//     gateway synthesizes has them, the route entry gives no way to set them.
//   - HTTPService.Filters (config_entry_routes.go:455) carries headers and URLRewrite;
//     headers apply in both the single-service and the split case
//     (gateway_httproute.go:90, 135), the URLRewrite only when the rule has one service
//     (gateway_httproute.go:86-89), and then it replaces the rule's rewrite.
//   - tcp-route Services holds at most one service (config_entry_routes.go:539-541) and
//     TCPService has no weight (config_entry_routes.go:577-581).
var Consul115 = Capabilities{
	ResponseHeaderModifier:  false,
	FullPathRewrite:         false,
	HostnameRewrite:         false,
	RequestTimeouts:         false,
	RetryPolicy:             false,
	SessionPersistence:      false,
	SingleBackendURLRewrite: true,
	TCPWeightedBackends:     false,
	// Consul has none; the controller turns it on when a responder answers redirects.
	RequestRedirect: false,
}

// WithResponder is c as served with the responder named service (the controller's
// --responder-service): it answers RequestRedirect, which no Consul http-route can
// express. An empty service changes nothing.
func (c Capabilities) WithResponder(service string) Capabilities {
	if service != "" {
		c.RequestRedirect, c.responder = true, true
	}
	return c
}

// RefusedStatus is the HTTP status the requests of rules without a valid backend are
// answered with: 500 from the responder, as the spec asks, or 503 from the blackhole,
// a service without instances, without one.
func (c Capabilities) RefusedStatus() int {
	if c.responder {
		return 500 // Internal Server Error
	}
	return 503 // Service Unavailable
}

// NotSupported ends every "cannot express" message, so they read the same everywhere.
const NotSupported = "is not supported by Consul's API gateway"

// httpMethods are the methods an http-route match can carry
// (config_entry_routes.go:346-357). Gateway API may add values to its enum; those must
// be refused, not passed through.
var httpMethods = map[gatewayv1.HTTPMethod]consulapi.HTTPMatchMethod{
	gatewayv1.HTTPMethodConnect: consulapi.HTTPMatchMethodConnect,
	gatewayv1.HTTPMethodDelete:  consulapi.HTTPMatchMethodDelete,
	gatewayv1.HTTPMethodGet:     consulapi.HTTPMatchMethodGet,
	gatewayv1.HTTPMethodHead:    consulapi.HTTPMatchMethodHead,
	gatewayv1.HTTPMethodOptions: consulapi.HTTPMatchMethodOptions,
	gatewayv1.HTTPMethodPatch:   consulapi.HTTPMatchMethodPatch,
	gatewayv1.HTTPMethodPost:    consulapi.HTTPMatchMethodPost,
	gatewayv1.HTTPMethodPut:     consulapi.HTTPMatchMethodPut,
	gatewayv1.HTTPMethodTrace:   consulapi.HTTPMatchMethodTrace,
}

// HTTPMethod is method as an http-route match carries it; ok is false when it cannot.
func HTTPMethod(method gatewayv1.HTTPMethod) (consulapi.HTTPMatchMethod, bool) {
	m, ok := httpMethods[method]
	return m, ok
}

// RegexProblem says why Envoy would refuse value as a regex match, or why Consul
// would not match it as written, or "" when neither. Consul passes regex matches
// through unchecked, and Envoy compiles them with RE2 and rejects the gateway's whole
// route configuration over one that does not compile (lookahead, backreferences,
// unbalanced groups), so such a match must never reach Consul. Go's regexp syntax is
// RE2's, but for the named group form "(?<name>...)": Go accepts it since 1.22, RE2
// only since its 2023-09-01 release, after the one Envoy 1.27 builds with. An empty
// regex is no regex to Consul: it drops the condition (Consul 1.15.4
// agent/xds/routes.go makeRouteMatchForDiscoveryRoute), and the match would select
// more than the route says.
func RegexProblem(value string) string {
	if value == "" {
		return "regex is empty, and Consul would drop it from the match"
	}
	if _, err := regexp.Compile(value); err != nil {
		return fmt.Sprintf("regex %q is not valid RE2 (%v)", value, err)
	}
	if hasAngleNamedGroup(value) {
		return fmt.Sprintf("regex %q names a group as (?<name>...), which the RE2 of Envoy 1.27 does not parse: write (?P<name>...)", value)
	}
	return ""
}

// hasAngleNamedGroup reports whether a regex Go compiles has a group "(?<name>...)":
// a "(?<" that is neither escaped nor in a character class (lookbehinds, the only
// other "(?<", do not compile).
func hasAngleNamedGroup(expr string) bool {
	inClass := false
	for i := 0; i < len(expr); i++ {
		switch {
		case strings.HasPrefix(expr[i:], `\Q`):
			end := strings.Index(expr[i+2:], `\E`)
			if end < 0 {
				return false
			}
			i += 2 + end + 1
		case expr[i] == '\\':
			i++
		case inClass && strings.HasPrefix(expr[i:], "[:"):
			if end := strings.Index(expr[i:], ":]"); end > 0 {
				i += end + 1
			}
		case inClass:
			inClass = expr[i] != ']'
		case expr[i] == '[':
			inClass = true
			i = skipClassStart(expr, i)
		case strings.HasPrefix(expr[i:], "(?<"):
			return true
		}
	}
	return false
}

// skipClassStart returns the index of the last byte of a class's opening: "[", "[^",
// and a "]" right after them, which is a literal.
func skipClassStart(expr string, i int) int {
	if i+1 < len(expr) && expr[i+1] == '^' {
		i++
	}
	if i+1 < len(expr) && expr[i+1] == ']' {
		i++
	}
	return i
}
