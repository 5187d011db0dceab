package consul

import (
	"reflect"
	"testing"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
)

// capabilityExamples holds, for each field of consullimits.Capabilities, a rule that
// uses exactly that feature and nothing else Consul could refuse.
func capabilityExamples() map[string]any {
	httpRule := func(rule gatewayv1.HTTPRouteRule) confirmedHTTPRoute {
		rule.BackendRefs = append(rule.BackendRefs, trHTTPRef("", "web", 8080, nil))
		return trHTTPRoute("apps", "r", nil, trAttached(trAttach("apps", "gw", "http")), rule)
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
			Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.FullPathHTTPPathModifier, ReplaceFullPath: trPtr("/x")},
		})}}),
		"HostnameRewrite": httpRule(gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{rewrite(gatewayv1.HTTPURLRewriteFilter{
			Hostname: trPtr(gatewayv1.PreciseHostname("b.example.com")),
		})}}),
		"RequestTimeouts":    httpRule(gatewayv1.HTTPRouteRule{Timeouts: &gatewayv1.HTTPRouteTimeouts{Request: trPtr(gatewayv1.Duration("5s"))}}),
		"RetryPolicy":        httpRule(gatewayv1.HTTPRouteRule{Retry: &gatewayv1.HTTPRouteRetry{Attempts: trPtr(2)}}),
		"SessionPersistence": httpRule(gatewayv1.HTTPRouteRule{SessionPersistence: &gatewayv1.SessionPersistence{SessionName: trPtr("s")}}),
		"SingleBackendURLRewrite": trHTTPRoute("apps", "r", nil, trAttached(trAttach("apps", "gw", "http")), gatewayv1.HTTPRouteRule{
			Matches: []gatewayv1.HTTPRouteMatch{trPrefix("/api")},
			BackendRefs: []gatewayv1.HTTPBackendRef{trHTTPRef("", "web", 8080, nil, rewrite(gatewayv1.HTTPURLRewriteFilter{
				Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: trPtr("/")},
			}))},
		}),
		"TCPWeightedBackends": trTCPRoute("apps", "r", trAttached(trAttach("apps", "gw", "tcp")),
			trRef("", "web", 8080, trPtr[int32](1)), trRef("", "db", 5432, trPtr[int32](1))),
	}
}

// The status pipeline serves a feature exactly when consullimits.Consul115 says Consul
// can express it, so the translation must write every such feature and leave out every
// other: a flag turned on without teaching the translation fails here, as does a
// translation that writes a rule without a field it has no place for.
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
			d := Translate(trSnapshot(
				trGateway("apps", "gw", true, trValid(trHTTP("http", 80, "")), trValid(trTCP("tcp", 9000))),
				trService("apps", "web", 8080), trService("apps", "db", 5432),
				example,
			), Naming{}, trOwnership, Options{})
			expressible := caps.Field(i).Bool()
			if expressible && len(d.Problems) > 0 {
				t.Errorf("Consul115 says %s is expressible, but the translation reports %v", field, d.Problems)
			}
			if !expressible && len(d.Problems) == 0 {
				t.Errorf("Consul115 says %s is not expressible, but the translation wrote it without a problem", field)
			}
			routes := 0
			for key := range d.Entries {
				if key.Kind == "http-route" || key.Kind == "tcp-route" {
					routes++
				}
			}
			if expressible != (routes == 1) {
				t.Errorf("%d route entries written for an example Consul115 calls expressible=%v", routes, expressible)
			}
		})
	}
}
