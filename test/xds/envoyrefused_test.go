package xds

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/xds/envoy"
)

// TestModelRefusesWhatConsulPassesThrough writes, next to a good route, an http-route
// of each kind the controller refuses (scenario envoyrefused) straight into a Consul
// 1.15 of the test's own, as a controller without those checks would, and requires the
// model to refuse what Consul then serves the gateway, as Envoy 1.27 does: Consul
// accepts each entry and copies the value into the port's route configuration.
//
// Each kind is judged by an Envoy that connects once the bad route is written; the
// one connected from the start keeps the last table it accepted, the good route's
// alone. Consul sends a NACKed resource again only when it changes: when the bad
// route goes and the table is the accepted one again, that Envoy hears nothing.
func TestModelRefusesWhatConsulPassesThrough(t *testing.T) {
	agent, client := startOwnConsul(t)
	gw := registerChainFixture(t, client)
	running := envoy.Watch(t.Context(), agent.GRPCAddr(), gw)
	t.Cleanup(running.Close)
	writeEntry(t, client, routeTo("good", "echo"))
	awaitServed(t, running, 8080, "200")

	headers := func(h consulapi.HTTPHeaderFilter) consulapi.HTTPFilters {
		return consulapi.HTTPFilters{Headers: []consulapi.HTTPHeaderFilter{h}}
	}
	tests := []struct {
		name   string
		rule   consulapi.HTTPRouteRule
		refuse string // what the model's refusal says
	}{
		{"Host set", consulapi.HTTPRouteRule{Filters: headers(consulapi.HTTPHeaderFilter{Set: map[string]string{"Host": "internal.example.com"}})},
			":-prefixed or host headers may not be modified"},
		{":authority removed", consulapi.HTTPRouteRule{Filters: headers(consulapi.HTTPHeaderFilter{Remove: []string{":authority"}})},
			":-prefixed or host headers may not be removed"},
		{"an empty name removed", consulapi.HTTPRouteRule{Filters: headers(consulapi.HTTPHeaderFilter{Remove: []string{""}})},
			"RequestHeadersToRemove"},
		{"a value with CR LF", consulapi.HTTPRouteRule{Filters: headers(consulapi.HTTPHeaderFilter{Add: map[string]string{"X-Note": "a\r\nX-Injected: 1"}})},
			"HeaderValue.Value: value does not match regex pattern"},
		{"a value with NUL on a service", consulapi.HTTPRouteRule{Services: []consulapi.HTTPService{{Name: "echo",
			Filters: headers(consulapi.HTTPHeaderFilter{Set: map[string]string{"X-Note": "a\x00b"}})}}},
			"HeaderValue.Value: value does not match regex pattern"},
		{"a value with a lone %", consulapi.HTTPRouteRule{Filters: headers(consulapi.HTTPHeaderFilter{Set: map[string]string{"X-Rate": "100%"}})},
			"un-terminated"},
		{"a prefix rewrite with LF", consulapi.HTTPRouteRule{Filters: consulapi.HTTPFilters{URLRewrite: &consulapi.URLRewrite{Path: "/new\nline"}}},
			"RouteAction.PrefixRewrite"},
		{"a header match name with CR", consulapi.HTTPRouteRule{Matches: []consulapi.HTTPMatch{{
			Path:    consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchPrefix, Value: "/bad"},
			Headers: []consulapi.HTTPHeaderMatch{{Match: consulapi.HTTPHeaderMatchExact, Name: "x-a\r", Value: "1"}}}}},
			"HeaderMatcher.Name"},
		{"a group named (?<name>)", consulapi.HTTPRouteRule{Matches: []consulapi.HTTPMatch{{
			Path: consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchRegularExpression, Value: "/items/(?<id>[0-9]+)"}}}},
			"invalid perl operator: (?<"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := routeTo("bad", "echo")
			bad.Hostnames = []string{"bad.example.com"}
			rule := tt.rule
			if len(rule.Matches) == 0 {
				rule.Matches = []consulapi.HTTPMatch{{Path: consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchPrefix, Value: "/bad"}}}
			}
			if len(rule.Services) == 0 {
				rule.Services = []consulapi.HTTPService{{Name: "echo"}}
			}
			bad.Rules = []consulapi.HTTPRouteRule{rule}
			writeEntry(t, client, bad)
			awaitBound(t, client, "bad")
			connected := envoy.Watch(t.Context(), agent.GRPCAddr(), gw)
			defer connected.Close()
			awaitRefused(t, connected, tt.refuse)
			awaitRefused(t, running, tt.refuse)
			if got := served(running, 8080); got != "200" {
				t.Errorf("the running Envoy answers GET / with %s, want the last accepted table's 200", got)
			}
			deleteEntry(t, client, consulapi.HTTPRoute, "bad")
		})
	}
	again := envoy.Watch(t.Context(), agent.GRPCAddr(), gw)
	defer again.Close()
	awaitAccepted(t, again)
	awaitServed(t, again, 8080, "200")
}

// awaitRefused waits until the model has refused what Consul sent, saying want.
func awaitRefused(t *testing.T, w *envoy.Watcher, want string) {
	t.Helper()
	var refusal error
	testenv.Eventually(t, 60*time.Second, "the model refuses the route configuration saying "+want, func(ctx context.Context) error {
		_, err := configWithin(ctx, w, 5*time.Second)
		if !errors.Is(err, envoy.ErrRejected) || !strings.Contains(err.Error(), want) {
			return fmt.Errorf("configuration: %w", err)
		}
		refusal = err
		return nil
	})
	t.Log(refusal)
}

// awaitAccepted waits until the model takes what Consul serves again.
func awaitAccepted(t *testing.T, w *envoy.Watcher) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, "the model accepts the route configuration again", func(ctx context.Context) error {
		_, err := configWithin(ctx, w, 5*time.Second)
		return err
	})
}

func configWithin(ctx context.Context, w *envoy.Watcher, d time.Duration) (*envoy.Config, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return w.Config(ctx, time.Second)
}
