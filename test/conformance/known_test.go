package conformance

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/conformance/judge"
)

// Causes shared by several entries.
const (
	hostWithOtherPort = "Consul 1.15 gives each virtual host the domains host and host:<listener port> " +
		"(agent/xds/routes.go), so a request whose Host header carries another port (very.specific.com:1234 " +
		"on port 80) reaches no virtual host, and Envoy answers 404; every other request of the test passes"
	hostlessBesideWildcard = "a listener without hostname and a wildcard one on the same port: one Consul " +
		"listener serves both, and Consul 1.15 puts the wildcard's routes and the catch-all in one virtual host, " +
		"so the status pipeline refuses the wildcard listener (PortUnavailable)"
)

// gotStatus matches the suite's complaint about a request to one of paths that got
// status got where it expects want.
func gotStatus(got, want int, paths ...string) *regexp.Regexp {
	quoted := make([]string, len(paths))
	for i, p := range paths {
		quoted[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(fmt.Sprintf(`Path:(%s) .*?(expected status code to be one of \[%d\], got %d)`, strings.Join(quoted, "|"), want, got))
}

// listenerRefused matches the suite waiting in vain for a listener of a Gateway to
// be accepted, which is PortUnavailable.
func listenerRefused(gateway, listener string) *regexp.Regexp {
	return regexp.MustCompile(`(?s)Accepted condition set to Status False with Reason (PortUnavailable), expected Status True.*?` +
		`gateway (` + regexp.QuoteMeta(gateway) + `) doesn't have Accepted condition set to True on (` + regexp.QuoteMeta(listener) + `) listener`)
}

// knownFailures are the tests known to fail, each with the failure it must fail with
// (judge.Known): known tests run like any other, and the judge fails the run when one
// passes, fails otherwise, or anything else fails. The runs have the responder on
// (--responder-service), so the tests that expect HTTP 500 for a rule without a usable
// backend, and RequestRedirect, are answered by it and are not here.
var knownFailures = []judge.Known{
	{Test: "HTTPRouteHostnameIntersection", Why: hostWithOtherPort,
		Failure: regexp.MustCompile(`Host: (very\.specific\.com:1234), .*?(expected status code to be one of \[200\], got 404)`)},
	{Test: "HTTPRouteHTTPSListener", StatusToo: true, Why: hostlessBesideWildcard,
		Failure: listenerRefused("gateway-conformance-infra/same-namespace-with-https-listener", "https-with-wildcard-hostname")},

	// The TCPRoute tests run in the traffic run only (the status run cannot answer the
	// tcp helper's own dials), so their status failures are met there.
	{Test: "TCPRouteWeightedRouting",
		Why: "weighted backendRefs: Consul's tcp-route forwards to a single service without weights (Consul 1.15.4 " +
			"agent/structs/config_entry_routes.go:539-541, 577-581), so the route is Accepted=False/UnsupportedValue",
		Failure: regexp.MustCompile(`(?s)Accepted condition set to Status False with Reason (UnsupportedValue), expected Status True.*?` +
			`(backends would receive traffic, but Consul's tcp-route forwards to a single service)`)},
	{Test: "HTTPRouteServiceTypes",
		Why: "Services without a selector resolve through their EndpointSlices' pods to the Consul service those " +
			"pods register under, but the suite's echo pods are not injected (registered) pods, so the backendRefs are " +
			"EndpointsNotRegistered, and their requests get the responder's 500 (a rule without a usable backend) where " +
			"the test expects 200",
		Failure: gotStatus(500, 200, "/manual-endpointslices", "/headless-manual-endpointslices")},
}
