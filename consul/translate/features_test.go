package translate

import (
	"fmt"
	"slices"
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

// misroutings are checks of features whose examples the translation writes as they
// are, but Consul routes otherwise than their conformance tests expect: each says
// how ("" when it does not).
var misroutings = map[features.FeatureName]func(Desired) string{
	features.SupportHTTPRouteMethodMatching: methodRanksBelowHeaders,
}

// featureExamples holds an example for every feature that can be claimed
// (consullimits.Features) and every feature deliberately not claimed
// (consullimits.NotClaimed).
func featureExamples() map[features.FeatureName]featureExample {
	gw := confirmedGateway("apps", "gw", true,
		validListener(httpListener("http", 80, "")),
		validListener(httpsListener("https", 443, "", certRef("certs", "www"))),
		validListener(tcpListener("tcp", 9000)))
	base := []any{gw, tlsSecret("certs", "www")}
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
		// Two hostnames on one port, as HTTPRouteListenerPortMatching has (foo.com and
		// bar.com on 8080): one Consul listener, the hostnames in the route's entry.
		features.SupportHTTPRouteParentRefPort: {[]any{
			confirmedGateway("apps", "gw", true, validListener(httpListener("foo", 8080, "foo.com")), validListener(httpListener("bar", 8080, "bar.com"))),
			newConfirmedHTTPRoute("apps", "r", nil, attachedTo(attachment("apps", "gw", "foo", "bar")), gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "web", 8080, nil)}}),
		}, []string{consulapi.APIGateway, consulapi.HTTPRoute}},
		// A certificate and a backend in other namespaces, which the status pipeline
		// checked against ReferenceGrants.
		features.SupportReferenceGrant: route(gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("shared", "api", 8080, nil)}}),
		// HTTPRouteMethodMatching's last case: PATCH / with header version: four must
		// reach the method rule, which Gateway API ranks above the header rule.
		features.SupportHTTPRouteMethodMatching: route(
			gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{{Method: new(gatewayv1.HTTPMethodPatch)}}},
			gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{{Headers: []gatewayv1.HTTPHeaderMatch{{Name: "version", Value: "four"}}}}},
		),
		features.SupportHTTPRouteQueryParamMatching: route(gatewayv1.HTTPRouteRule{Matches: []gatewayv1.HTTPRouteMatch{{QueryParams: []gatewayv1.HTTPQueryParamMatch{
			{Name: "animal", Value: "whale"}, {Type: new(gatewayv1.QueryParamMatchRegularExpression), Name: "color", Value: "bl.*"},
		}}}}),
		// A parentRef with a port no listener has is the status pipeline's
		// NoMatchingParent: nothing of the route is written, the Gateway is.
		features.SupportHTTPRouteDestinationPortMatching: {[]any{confirmedGateway("apps", "gw", true, validListener(httpListener("http", 80, "")))}, []string{consulapi.APIGateway}},
		// A named rule routes as an unnamed one (httproute-named-rule).
		features.SupportHTTPRouteNamedRouteRule: route(gatewayv1.HTTPRouteRule{
			Name:    new(gatewayv1.SectionName("named-rule")),
			Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: new(gatewayv1.PathMatchPathPrefix), Value: new("/named")}}},
		}),
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
			misroutes, checked := misroutings[name]
			misrouted := ""
			if expressed && checked {
				misrouted = misroutes(d)
			}
			switch {
			case claimed[name] && !expressed:
				t.Errorf("%s is claimed for Consul 1.15, but the translation does not write its example: problems %v, entries %v", name, d.Problems, written)
			case claimed[name] && misrouted != "":
				t.Errorf("%s is claimed for Consul 1.15, but Consul misroutes its example: %s", name, misrouted)
			case !claimed[name] && expressed && checked && misrouted == "":
				t.Errorf("Consul routes the example of %s as its conformance tests expect, but it is not claimed: claim it (consullimits.Features) or make the example exercise what is missing", name)
			case !claimed[name] && expressed && !checked:
				t.Errorf("the translation writes the example of %s, which is not claimed: claim it (consullimits.Features) or make the example exercise what is missing", name)
			}
		})
	}
}

// methodRanksBelowHeaders says whether Consul orders the method match of the example
// route after its header match of the same path, as compareHTTPRules ignores the
// method (see consulOrder).
func methodRanksBelowHeaders(d Desired) string {
	entry, _ := d.Entries[EntryKey{Kind: consulapi.HTTPRoute, Name: "r.apps"}].(*consulapi.HTTPRouteConfigEntry)
	if entry == nil {
		return ""
	}
	order := consulOrder(flattenMatches(entry.Rules, make([][]consulapi.HTTPMatch, len(entry.Rules))))
	method := slices.IndexFunc(order, func(m entryMatch) bool { return m.match.Method != "" })
	headers := slices.IndexFunc(order, func(m entryMatch) bool { return len(m.match.Headers) > 0 && m.match.Method == "" })
	if method < 0 || headers < 0 || method < headers {
		return ""
	}
	return fmt.Sprintf("Consul orders the header match %+v ahead of the method match %+v", order[headers].match, order[method].match)
}

func withInfrastructure(gw *gatewayv1.Gateway) *gatewayv1.Gateway {
	gw.Spec.Infrastructure = &gatewayv1.GatewayInfrastructure{Labels: map[gatewayv1.LabelKey]gatewayv1.LabelValue{"team": "edge"}}
	return gw
}

func withEmptyAddress(gw *gatewayv1.Gateway) *gatewayv1.Gateway {
	gw.Spec.Addresses = []gatewayv1.GatewaySpecAddress{{Type: new(gatewayv1.IPAddressType)}}
	return gw
}
