package consullimits

import (
	"slices"

	"sigs.k8s.io/gateway-api/pkg/features"
)

// Feature is a Gateway API conformance feature a GatewayClass of ours may claim in
// status.supportedFeatures, and when. A claim tells the conformance suite, and users,
// that everything the feature's conformance tests exercise works; so a feature is
// listed here only once the status pipeline accepts it and the translation writes it
// (consul/translate's TestClaimedFeaturesAreTranslated holds an example per feature).
type Feature struct {
	Name features.FeatureName
	// Served reports whether the feature is implemented end to end against a Consul
	// with these capabilities.
	Served func(Capabilities) bool
}

func always(Capabilities) bool { return true }

// Features are the features that can be claimed.
var Features = []Feature{
	// Gateway listeners HTTP, HTTPS (terminate) and TCP, and their status.
	{features.SupportGateway, always},
	// Cross-namespace certificateRefs and backendRefs, each checked against
	// ReferenceGrants.
	{features.SupportReferenceGrant, always},
	// A listener on port 8080 is an api-gateway listener like any other.
	{features.SupportGatewayPort8080, always},
	// spec.infrastructure: labels and annotations on the gateway's objects, and
	// parametersRef resolved to a GatewayConfig (InvalidParameters when it is not).
	{features.SupportGatewayInfrastructure, always},
	// An address entry without a value leaves the choice of address to the gateway's
	// Service.
	{features.SupportGatewayAddressEmpty, always},
	// http-route matches carry query Exact and Regex.
	{features.SupportHTTPRouteQueryParamMatching, always},
	// A parentRef whose port no listener has is NoMatchingParent, decided by the
	// status pipeline (HTTPRouteInvalidParentRefNotMatchingListenerPort).
	{features.SupportHTTPRouteDestinationPortMatching, always},
	// A rule's name is an identifier for policies and status; routing ignores it
	// (HTTPRouteNamedRule).
	{features.SupportHTTPRouteNamedRouteRule, always},
	// HTTPService.Filters.Headers, applied per service also on a split.
	{features.SupportHTTPRouteBackendRequestHeaderModification, always},
	{features.SupportHTTPRouteResponseHeaderModification, func(c Capabilities) bool { return c.ResponseHeaderModifier }},
	// The conformance tests of HTTPRoutePathRewrite cover full-path rewrites too.
	{features.SupportHTTPRoutePathRewrite, func(c Capabilities) bool { return c.FullPathRewrite }},
	// A parentRef's port selects the listeners of that port; listeners of one port
	// with different hostnames are one Consul listener.
	{features.SupportHTTPRouteParentRefPort, always},
	// ListenerSets' listeners join their Gateway's api-gateway entry, on ports of their
	// own or sharing the Gateway's.
	{features.SupportListenerSet, always},
}

// NotClaimed are the features a reader would expect of a controller serving HTTPRoute
// and TCPRoute, with what keeps them from being claimed. The routes themselves are
// served (see docs/status.md); what they cannot do is refused with a condition.
var NotClaimed = map[features.FeatureName]string{
	features.SupportHTTPRoute: "HTTPRoute core includes RequestRedirect (hostname and statusCode) and a 500 answer for backendRefs that cannot receive traffic; " +
		"Consul's http-route has neither (HTTPFilters holds Headers and URLRewrite only, Consul 1.15.4 agent/structs/config_entry_routes.go:416-419)",
	features.SupportTCPRoute: "TCPRoute conformance includes weighted backendRefs; Consul's tcp-route forwards to a single service without weights " +
		"(Consul 1.15.4 agent/structs/config_entry_routes.go:539-541, 577-581)",
	features.SupportHTTPRouteMethodMatching: "Consul orders the matches of a hostname by path length, then header and query counts, never by method " +
		"(Consul 1.15.4 agent/consul/discoverychain/gateway_httproute.go:22-30, sorted in gateway.go:202), where Gateway API ranks a method match above headers: " +
		"in HTTPRouteMethodMatching, PATCH / with header version: four reaches the header rule's backend instead of the method rule's. " +
		"Method matches are served (http-route matches carry a method, Consul 1.15.4 agent/structs/config_entry_routes.go:346-357)",
}

// SupportedFeatures lists, sorted, the features served with caps.
func SupportedFeatures(caps Capabilities) []features.FeatureName {
	var names []features.FeatureName
	for _, f := range Features {
		if f.Served(caps) {
			names = append(names, f.Name)
		}
	}
	slices.Sort(names)
	return names
}
