package translate

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	consulapi "github.com/hashicorp/consul/api"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
)

// capabilityExample is a route that uses one feature of consullimits.Capabilities and
// nothing else Consul could refuse, and the same route without the feature.
type capabilityExample struct {
	with, without any
}

// capabilityExamples holds an example for each field of consullimits.Capabilities.
func capabilityExamples() map[string]capabilityExample {
	httpRule := func(rule gatewayv1.HTTPRouteRule) confirmedHTTPRoute {
		rule.BackendRefs = append(rule.BackendRefs, httpBackend("", "web", 8080, nil))
		return newConfirmedHTTPRoute("apps", "r", nil, attachedTo(attachment("apps", "gw", "http")), rule)
	}
	plain := httpRule(gatewayv1.HTTPRouteRule{})
	rewrite := func(rw gatewayv1.HTTPURLRewriteFilter) gatewayv1.HTTPRouteFilter {
		return gatewayv1.HTTPRouteFilter{Type: gatewayv1.HTTPRouteFilterURLRewrite, URLRewrite: &rw}
	}
	backendRewrite := func(filters ...gatewayv1.HTTPRouteFilter) confirmedHTTPRoute {
		return newConfirmedHTTPRoute("apps", "r", nil, attachedTo(attachment("apps", "gw", "http")), gatewayv1.HTTPRouteRule{
			Matches:     []gatewayv1.HTTPRouteMatch{prefixMatch("/api")},
			BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "web", 8080, nil, filters...)},
		})
	}
	tcpRoute := func(refs ...gatewayv1.BackendRef) confirmedTCPRoute {
		return newConfirmedTCPRoute("apps", "r", attachedTo(attachment("apps", "gw", "tcp")), refs...)
	}
	return map[string]capabilityExample{
		"ResponseHeaderModifier": {httpRule(gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{{
			Type:                   gatewayv1.HTTPRouteFilterResponseHeaderModifier,
			ResponseHeaderModifier: &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "X-A", Value: "1"}}},
		}}}), plain},
		"FullPathRewrite": {httpRule(gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{rewrite(gatewayv1.HTTPURLRewriteFilter{
			Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.FullPathHTTPPathModifier, ReplaceFullPath: new("/x")},
		})}}), plain},
		"HostnameRewrite": {httpRule(gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{rewrite(gatewayv1.HTTPURLRewriteFilter{
			Hostname: new(gatewayv1.PreciseHostname("b.example.com")),
		})}}), plain},
		"RequestTimeouts":    {httpRule(gatewayv1.HTTPRouteRule{Timeouts: &gatewayv1.HTTPRouteTimeouts{Request: new(gatewayv1.Duration("5s"))}}), plain},
		"RetryPolicy":        {httpRule(gatewayv1.HTTPRouteRule{Retry: &gatewayv1.HTTPRouteRetry{Attempts: new(2)}}), plain},
		"SessionPersistence": {httpRule(gatewayv1.HTTPRouteRule{SessionPersistence: &gatewayv1.SessionPersistence{SessionName: new("s")}}), plain},
		"SingleBackendURLRewrite": {backendRewrite(rewrite(gatewayv1.HTTPURLRewriteFilter{
			Path: &gatewayv1.HTTPPathModifier{Type: gatewayv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: new("/")},
		})), backendRewrite()},
		"RequestRedirect": {httpRule(gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{{
			Type:            gatewayv1.HTTPRouteFilterRequestRedirect,
			RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{Hostname: new(gatewayv1.PreciseHostname("b.example.com"))},
		}}}), plain},
		"TCPWeightedBackends": {
			tcpRoute(backendRef("", "web", 8080, new(int32(1))), backendRef("", "db", 5432, new(int32(1)))),
			tcpRoute(backendRef("", "web", 8080, new(int32(1)))),
		},
	}
}

// decided gives a route example the decision the status pipeline makes with caps: the
// rules consullimits refuses are dropped.
func decided(example any, caps consullimits.Capabilities) any {
	switch r := example.(type) {
	case confirmedHTTPRoute:
		r.Decision.DroppedRules = nil
		for i, rule := range r.Route.Spec.Rules {
			if consullimits.HTTPRuleProblem(rule, caps) != "" {
				r.Decision.DroppedRules = append(r.Decision.DroppedRules, i)
			}
		}
		return r
	case confirmedTCPRoute:
		r.Decision.DroppedRules = nil
		for i, rule := range r.Route.Spec.Rules {
			if consullimits.TCPRuleProblem(rule, caps) != "" {
				r.Decision.DroppedRules = append(r.Decision.DroppedRules, i)
			}
		}
		return r
	}
	panic(fmt.Sprintf("no decision for %T", example))
}

func droppedRules(example any) []int {
	switch r := example.(type) {
	case confirmedHTTPRoute:
		return r.Decision.DroppedRules
	case confirmedTCPRoute:
		return r.Decision.DroppedRules
	}
	return nil
}

// The status pipeline keeps a rule exactly when consullimits says Consul can express
// it, and the translation trusts that decision. So for each capability: one that
// Consul115 has must be written (the entry differs from the one for the same route
// without the feature, and nothing is reported), and one it lacks must be refused by
// the checker and sent to the blackhole. A flag turned on without teaching the
// translation fails here: the translation would write the route as if the feature
// were not there.
func TestTranslationExpressesCapabilities(t *testing.T) {
	examples := capabilityExamples()
	caps := reflect.ValueOf(consullimits.Consul115)
	translate := func(example any) Desired {
		return Translate(snapshotOf(
			confirmedGateway("apps", "gw", true, validListener(httpListener("http", 80, "")), validListener(tcpListener("tcp", 9000))),
			decided(example, consullimits.Consul115),
		), Naming{}, testOwnership, Options{})
	}
	for i := range caps.NumField() {
		if !caps.Type().Field(i).IsExported() {
			continue // not a feature of routes (consullimits.Capabilities)
		}
		field := caps.Type().Field(i).Name
		t.Run(field, func(t *testing.T) {
			example, ok := examples[field]
			if !ok {
				t.Fatalf("no example uses %s; add one", field)
			}
			with, without := translate(example.with), translate(example.without)
			if len(with.Problems) > 0 || len(without.Problems) > 0 {
				t.Fatalf("the translation reports %v and %v", with.Problems, without.Problems)
			}
			expressible := caps.Field(i).Bool()
			if refused := len(droppedRules(decided(example.with, consullimits.Consul115))) > 0; refused == expressible {
				t.Errorf("Consul115.%s is %v, but consullimits refuses the example: %v", field, expressible, refused)
			}
			served := servedRules(with)
			if expressible != (served > 0) {
				t.Errorf("%d rules served for an example Consul115 calls expressible=%v", served, expressible)
			}
			if expressible && reflect.DeepEqual(with.Entries, without.Entries) {
				t.Errorf("Consul115 says %s is expressible, but the translation writes the route as if it were not there", field)
			}
		})
	}
}

// servedRules counts the route rules of d that send traffic somewhere but to the
// blackhole.
func servedRules(d Desired) int {
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
	return served
}
