package conformance

import (
	"regexp"
	"strings"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/conformance/judge"
)

// Causes shared by several entries.
const (
	onePortOneHostname = "Consul 1.15's api-gateway serves one hostname per port (Consul 1.15.4 " +
		"agent/structs/config_entry_gateways.go:802-811) and the controller keeps one Consul listener per Gateway " +
		"listener, so a second listener with another hostname on the port is Accepted=False/PortUnavailable"
	answers503 = "Gateway API wants 500 for a request whose rule has no backend that can receive it; Consul 1.15's " +
		"http-route has no fixed response (agent/structs/config_entry_routes.go:416-419), so the controller routes it " +
		"to a service without instances, and Envoy answers 503"
)

// expects500 matches the suite's complaint about a request to path that got 503 where
// it expects 500.
func expects500(paths ...string) *regexp.Regexp {
	quoted := make([]string, len(paths))
	for i, p := range paths {
		quoted[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(`Path:(` + strings.Join(quoted, "|") + `) .*?(expected status code to be 500, got 503)`)
}

// knownFailures are the tests known to fail as of this branch's code, each with the
// failure it must fail with (judge.Known): known tests run like any other, and the
// judge fails the run when one passes, fails otherwise, or anything else fails. Work in flight
// changes it: a responder answering 500s and redirects, and one Consul listener per
// port, make most entries pass; the judge then names each one to remove.
var knownFailures = []judge.Known{
	{Test: "HTTPRouteHostnameIntersection", StatusToo: true, Why: onePortOneHostname,
		Failure: regexp.MustCompile(`(listener-2)\b.*?(PortUnavailable)`)},
	{Test: "HTTPRouteHTTPSListener", StatusToo: true, Why: onePortOneHostname,
		Failure: regexp.MustCompile(`(https-with-hostname)\b.*?(PortUnavailable)`)},
	{Test: "HTTPRouteListenerHostnameMatching", StatusToo: true, Why: onePortOneHostname,
		Failure: regexp.MustCompile(`(listener-2)\b.*?(PortUnavailable)`)},
	{Test: "HTTPRouteRedirectHostAndStatus", StatusToo: true,
		Why: "RequestRedirect: Consul's http-route has no redirect (HTTPFilters holds Headers and URLRewrite only, " +
			"Consul 1.15.4 agent/structs/config_entry_routes.go:416-419), so the route is Accepted=False/UnsupportedValue",
		Failure: regexp.MustCompile(`(Accepted).*?(UnsupportedValue)`)},

	{Test: "HTTPRouteInvalidBackendRefUnknownKind", Why: answers503, Failure: expects500("/v2")},
	{Test: "HTTPRouteInvalidCrossNamespaceBackendRef", Why: answers503, Failure: expects500("/")},
	{Test: "HTTPRouteInvalidNonExistentBackendRef", Why: answers503, Failure: expects500("/")},
	{Test: "HTTPRouteInvalidReferenceGrant", Why: answers503, Failure: expects500("/")},
	{Test: "HTTPRouteNoBackendRefs", Why: answers503, Failure: expects500("/empty-no-forward", "/omitted-no-forward")},
	{Test: "HTTPRoutePartiallyInvalidViaInvalidReferenceGrant", Why: answers503, Failure: expects500("/v2")},
	{Test: "HTTPRouteReferenceGrant", Why: answers503 + " (the request after the ReferenceGrant is deleted; before, it reaches web-backend)",
		Failure: expects500("/")},
	{Test: "HTTPRouteServiceTypes",
		Why: "Services without a selector, whose EndpointSlices are written by hand, reach Consul's catalog only as " +
			"consul-k8s registers them, from pods a selector picks (testenv.MeshBackends does the same), so they have no " +
			"instance and Envoy answers 503 where the test expects 200",
		Failure: regexp.MustCompile(`Path:(/manual-endpointslices|/headless-manual-endpointslices) .*?(expected status code to be 200, got 503)`)},
}
