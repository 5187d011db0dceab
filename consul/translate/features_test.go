package translate

import (
	"testing"

	consulapi "github.com/hashicorp/consul/api"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/features"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
)

// featureExample is what a feature's conformance tests exercise, as confirmed objects,
// and the entry kinds the translation must write for it.
type featureExample struct {
	objects []any
	writes  []string
}

// featureExamples holds an example for every feature that can be claimed
// (consullimits.Features) and every feature deliberately not claimed
// (consullimits.NotClaimed).
func featureExamples() map[features.FeatureName]featureExample {
	gw := confirmedGateway("apps", "gw", true,
		validListener(httpListener("http", 80, "")),
		validListener(httpsListener("https", 443, "", certRef("certs", "www"))),
		validListener(tcpListener("tcp", 9000)))
	base := []any{gw, tlsSecret("certs", "www"), backendService("apps", "web", 8080), backendService("apps", "db", 5432), backendService("shared", "api", 8080)}
	onHTTP := attachedTo(attachment("apps", "gw", "http"))
	route := func(rules ...gatewayv1.HTTPRouteRule) featureExample {
		for i := range rules {
			if len(rules[i].BackendRefs) == 0 {
				rules[i].BackendRefs = []gatewayv1.HTTPBackendRef{httpBackend("", "web", 8080, nil)}
			}
		}
		return featureExample{append(base, newConfirmedHTTPRoute("apps", "r", nil, onHTTP, rules...)), []string{consulapi.APIGateway, consulapi.HTTPRoute}}
	}
	headers := func(name string) gatewayv1.HTTPRouteFilter {
		return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier,
			RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: gatewayv1.HTTPHeaderName(name), Value: "1"}}}}
	}
	return map[features.FeatureName]featureExample{
		features.SupportGateway:         {base, []string{consulapi.APIGateway, consulapi.InlineCertificate}},
		features.SupportGatewayPort8080: {[]any{confirmedGateway("apps", "gw", true, validListener(httpListener("http", 8080, "")))}, []string{consulapi.APIGateway}},
		// Decided by the status pipeline and the data plane; the Gateway is then
		// translated like any other.
		features.SupportGatewayInfrastructure: {[]any{withInfrastructure(confirmedGateway("apps", "gw", true, validListener(httpListener("http", 80, ""))))}, []string{consulapi.APIGateway}},
		features.SupportGatewayAddressEmpty:   {[]any{withEmptyAddress(confirmedGateway("apps", "gw", true, validListener(httpListener("http", 80, ""))))}, []string{consulapi.APIGateway}},
		// The status pipeline attaches by port; the route is written for the listener.
		features.SupportHTTPRouteParentRefPort: route(gatewayv1.HTTPRouteRule{}),
		// A certificate and a backend in other namespaces, which the status pipeline
		// checked against ReferenceGrants.
		features.SupportReferenceGrant:          route(gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("shared", "api", 8080, nil)}}),
		features.SupportHTTPRouteMethodMatching: route(gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{{Method: new(gatewayv1.HTTPMethodPost)}}}),
		features.SupportHTTPRouteQueryParamMatching: route(gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{{QueryParams: []gatewayv1.HTTPQueryParamMatch{
			{Name: "animal", Value: "whale"}, {Type: new(gatewayv1.QueryParamMatchRegularExpression), Name: "color", Value: "bl.*"},
		}}}}),
		// Per-backend headers on a weighted split (httproute-request-header-modifier-backend-weights).
		features.SupportHTTPRouteBackendRequestHeaderModification: route(gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{
			httpBackend("", "web", 8080, new(int32(70)), headers("X-Web")), httpBackend("shared", "api", 8080, new(int32(30)), headers("X-Api")),
		}}),
		features.SupportHTTPRouteResponseHeaderModification: route(gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{{
			Type: gatewayv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "X-A", Value: "1"}}},
		}}}),
		features.SupportHTTPRoutePathRewrite: route(gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{{
			Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &gatewayv1.HTTPURLRewriteFilter{
				Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.FullPathHTTPPathModifier, ReplaceFullPath: new("/one")},
			},
		}}}),
		// Core HTTPRoute redirects (httproute-redirect-host-and-status).
		features.SupportHTTPRoute: route(gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{{
			Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{
				Hostname: new(gatewayv1.PreciseHostname("example.org")), StatusCode: new(301),
			},
		}}}),
		// A ListenerSet's listener on the Gateway's port with another hostname, as every
		// ListenerSet conformance test has (listenerset-allowed-namespace-same).
		features.SupportListenerSet: {[]any{
			confirmedGateway("infra", "gw", true, validListener(httpListener("http", 80, "gateway.example.com"))),
			confirmedListenerSet("apps", "extra", 1, true, validListener(httpListener("extra", 80, "extra.example.com"))),
		}, []string{consulapi.APIGateway}},
		// Weighted TCP backends (tcproute-weighted-routing).
		features.SupportTCPRoute: {append(base, newConfirmedTCPRoute("apps", "r", attachedTo(attachment("apps", "gw", "tcp")),
			backendRef("", "web", 8080, new(int32(50))), backendRef("", "db", 5432, new(int32(50))))), []string{consulapi.APIGateway, consulapi.TCPRoute}},
	}
}

// A GatewayClass claims a feature only when the translation writes what the feature's
// conformance tests exercise, and a feature whose example the translation writes
// without a problem is not left out silently: the claim and the implementation
// change together.
func TestClaimedFeaturesAreTranslated(t *testing.T) {
	claimed := map[features.FeatureName]bool{}
	for _, name := range consullimits.SupportedFeatures(consullimits.Consul115) {
		claimed[name] = true
	}
	examples := featureExamples()
	for _, f := range consullimits.Features {
		if _, ok := examples[f.Name]; !ok {
			t.Errorf("no example for %s; add one", f.Name)
		}
	}
	for name := range consullimits.NotClaimed {
		if _, ok := examples[name]; !ok {
			t.Errorf("no example for %s, which is not claimed; add one", name)
		}
	}
	for name, ex := range examples {
		t.Run(string(name), func(t *testing.T) {
			d := Translate(snapshotOf(ex.objects...), Naming{}, testOwnership, Options{})
			written := map[string]bool{}
			for key := range d.Entries {
				written[key.Kind] = true
			}
			expressed := len(d.Problems) == 0
			for _, kind := range ex.writes {
				expressed = expressed && written[kind]
			}
			switch {
			case claimed[name] && !expressed:
				t.Errorf("%s is claimed for Consul 1.15, but the translation does not write its example: problems %v, entries %v", name, d.Problems, written)
			case !claimed[name] && expressed:
				t.Errorf("the translation writes the example of %s, which is not claimed: claim it (consullimits.Features) or make the example exercise what is missing", name)
			}
		})
	}
}

func withInfrastructure(gw *gatewayv1.Gateway) *gatewayv1.Gateway {
	gw.Spec.Infrastructure = &gatewayv1.GatewayInfrastructure{Labels: map[gatewayv1.LabelKey]gatewayv1.LabelValue{"team": "edge"}}
	return gw
}

func withEmptyAddress(gw *gatewayv1.Gateway) *gatewayv1.Gateway {
	gw.Spec.Addresses = []gatewayv1.GatewaySpecAddress{{Type: new(gatewayv1.IPAddressType)}}
	return gw
}
