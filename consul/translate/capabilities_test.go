package translate

import (
	"reflect"
	"slices"
	"testing"

	consulapi "github.com/hashicorp/consul/api"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
)

// capabilityExamples holds, for each field of consullimits.Capabilities, a rule that
// uses exactly that feature and nothing else Consul could refuse.
func capabilityExamples() map[string]any {
	httpRule := func(rule gatewayv1.HTTPRouteRule) confirmedHTTPRoute {
		rule.BackendRefs = append(rule.BackendRefs, httpBackend("", "web", 8080, nil))
		return newConfirmedHTTPRoute("apps", "r", nil, attachedTo(attachment("apps", "gw", "http")), rule)
	}
	rewrite := func(rw gatewayv1.HTTPURLRewriteFilter) gatewayv1.HTTPRouteFilter {
		return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &rw}
	}
	return map[string]any{
		"ResponseHeaderModifier": httpRule(gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{{
			Type:                   gatewayv1.HTTPRouteFilterResponseHeaderModifier,
			ResponseHeaderModifier: &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "X-A", Value: "1"}}},
		}}}),
		"FullPathRewrite": httpRule(gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{rewrite(gatewayv1.HTTPURLRewriteFilter{
			Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.FullPathHTTPPathModifier, ReplaceFullPath: new("/x")},
		})}}),
		"HostnameRewrite": httpRule(gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{rewrite(gatewayv1.HTTPURLRewriteFilter{
			Hostname: new(gatewayv1.PreciseHostname("b.example.com")),
		})}}),
		"RequestTimeouts":    httpRule(gatewayv1.HTTPRouteRule{Timeouts: &gatewayv1.HTTPRouteTimeouts{Request: new(gatewayv1.Duration("5s"))}}),
		"RetryPolicy":        httpRule(gatewayv1.HTTPRouteRule{Retry: &gatewayv1.HTTPRouteRetry{Attempts: new(2)}}),
		"SessionPersistence": httpRule(gatewayv1.HTTPRouteRule{SessionPersistence: &gatewayv1.SessionPersistence{SessionName: new("s")}}),
		"SingleBackendURLRewrite": newConfirmedHTTPRoute("apps", "r", nil, attachedTo(attachment("apps", "gw", "http")), gatewayv1.HTTPRouteRule{
			Matches: []gatewayv1.HTTPRouteMatch{prefixMatch("/api")},
			BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "web", 8080, nil, rewrite(gatewayv1.HTTPURLRewriteFilter{
				Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: new("/")},
			}))},
		}),
		"TCPWeightedBackends": newConfirmedTCPRoute("apps", "r", attachedTo(attachment("apps", "gw", "tcp")),
			backendRef("", "web", 8080, new(int32(1))), backendRef("", "db", 5432, new(int32(1)))),
	}
}

// The status pipeline serves a feature exactly when consullimits.Consul115 says Consul
// can express it, so the translation must write every such feature and refuse every
// other (its requests go to the blackhole, and a problem says why): a flag turned on
// without teaching the translation fails here, as does a translation that writes a
// rule without a field it has no place for.
func TestTranslationExpressesCapabilities(t *testing.T) {
	examples := capabilityExamples()
	caps := reflect.ValueOf(consullimits.Consul115)
	for i := range caps.NumField() {
		field := caps.Type().Field(i).Name
		t.Run(field, func(t *testing.T) {
			example, ok := examples[field]
			if !ok {
				t.Fatalf("no example uses %s; add one", field)
			}
			d := Translate(snapshotOf(
				confirmedGateway("apps", "gw", true, validListener(httpListener("http", 80, "")), validListener(tcpListener("tcp", 9000))),
				backendService("apps", "web", 8080), backendService("apps", "db", 5432),
				example,
			), Naming{}, testOwnership, Options{})
			expressible := caps.Field(i).Bool()
			if expressible && len(d.Problems) > 0 {
				t.Errorf("Consul115 says %s is expressible, but the translation reports %v", field, d.Problems)
			}
			if !expressible && len(d.Problems) == 0 {
				t.Errorf("Consul115 says %s is not expressible, but the translation wrote it without a problem", field)
			}
			served := 0
			for _, e := range d.Entries {
				switch e := e.(type) {
				case *consulapi.HTTPRouteConfigEntry:
					for _, rule := range e.Rules {
						if !slices.ContainsFunc(rule.Services, func(s consulapi.HTTPService) bool { return s.Name == Naming{}.BlackholeService() }) {
							served++
						}
					}
				case *consulapi.TCPRouteConfigEntry:
					served++
				}
			}
			if expressible != (served > 0) {
				t.Errorf("%d rules served for an example Consul115 calls expressible=%v", served, expressible)
			}
		})
	}
}
