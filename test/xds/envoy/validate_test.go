package envoy

import (
	"errors"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// response is a Delta xDS response carrying resources by name.
func response(t testing.TB, typeURL string, resources map[string]proto.Message) *discoveryv3.DeltaDiscoveryResponse {
	resp := &discoveryv3.DeltaDiscoveryResponse{TypeUrl: typeURL, Nonce: "1"}
	for name, m := range resources {
		resp.Resources = append(resp.Resources, &discoveryv3.Resource{Name: name, Resource: mustAny(t, m)})
	}
	return resp
}

// routesWith is a route configuration of the given virtual hosts.
func routesWith(vhs ...*routev3.VirtualHost) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{Name: "80", VirtualHosts: vhs}
}

func withHeaders(r *routev3.Route, add []*corev3.HeaderValueOption, remove []string) *routev3.Route {
	r.RequestHeadersToAdd, r.RequestHeadersToRemove = add, remove
	return r
}

// Each case is a route configuration Envoy refuses when it builds the route table
// (source/common/router/config_impl.cc and header_parser.cc); a NACK leaves the last
// accepted configuration in place.
func TestRouteConfigurationsEnvoyRefuses(t *testing.T) {
	validated := routesWith(vhost("a", []string{"a.com"}, toRoute("gone")))
	validated.ValidateClusters = wrapperspb.Bool(true)
	bothRewrites := toRoute("a")
	bothRewrites.GetRoute().PrefixRewrite = "/x"
	bothRewrites.GetRoute().RegexRewrite = &matcherv3.RegexMatchAndSubstitute{Pattern: &matcherv3.RegexMatcher{Regex: "a"}, Substitution: "b"}
	onRoute := func(r *routev3.Route) *routev3.RouteConfiguration { return routesWith(vhost("a", []string{"*"}, r)) }
	setHeader := func(key, value string) *routev3.RouteConfiguration {
		return onRoute(withHeaders(toRoute("a"), []*corev3.HeaderValueOption{header(key, value, false)}, nil))
	}
	removeHeader := func(name string) *routev3.RouteConfiguration {
		return onRoute(withHeaders(toRoute("a"), nil, []string{name}))
	}
	matching := func(m *routev3.RouteMatch) *routev3.RouteConfiguration {
		return onRoute(&routev3.Route{Match: m, Action: toCluster("a")})
	}
	headerRegex := func(re string) *routev3.RouteMatch {
		return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, Headers: []*routev3.HeaderMatcher{{
			Name: "x", HeaderMatchSpecifier: &routev3.HeaderMatcher_SafeRegexMatch{SafeRegexMatch: &matcherv3.RegexMatcher{Regex: re}}}}} //nolint:staticcheck // what Consul 1.15 sends
	}
	withAction := func(mutate func(*routev3.RouteAction)) *routev3.RouteConfiguration {
		r := toRoute("a")
		mutate(r.GetRoute())
		return onRoute(r)
	}
	splitSettingHost := &routev3.Route{Match: toRoute("").GetMatch(), Action: weighted(weight("a", 1), weight("b", 1))}
	splitSettingHost.GetRoute().GetWeightedClusters().GetClusters()[1].RequestHeadersToAdd = []*corev3.HeaderValueOption{header("host", "x", false)}
	vhRemovingAuthority := vhost("a", []string{"*"}, toRoute("a"))
	vhRemovingAuthority.RequestHeadersToRemove = []string{":authority"}
	tests := []struct {
		name string
		rc   *routev3.RouteConfiguration
		want string
		// notModelled: refused as beyond the model, not as Envoy refuses it.
		notModelled bool
	}{
		// Issue 42: every kind of value Consul copies from an http-route unchecked.
		{"header value with CR LF", setHeader("x", "a\r\nx-injected: 1"), "HeaderValue.Value: value does not match regex pattern", false},
		{"header value with NUL", setHeader("x", "a\x00b"), "HeaderValue.Value: value does not match regex pattern", false},
		{"header name with LF", setHeader("x\ny", "1"), "HeaderValue.Key: value does not match regex pattern", false},
		{"header value over 16384 bytes", setHeader("x", strings.Repeat("v", 16385)), "HeaderValue.Value: value length must be at most 16384 bytes", false},
		{"Host set by a weighted cluster", onRoute(splitSettingHost), "may not be modified", false},
		{":authority removed by a virtual host", routesWith(vhRemovingAuthority), "may not be removed", false},
		{"removal of a name with CR", removeHeader("x\r"), "RequestHeadersToRemove", false},
		{"removal of an empty name", removeHeader(""), "RequestHeadersToRemove", false},
		{"lone % at the end of a value", setHeader("x", "100%"), "un-terminated", false},
		{"command operator in a value", setHeader("x", "%START_TIME%"), "command operator %START_TIME%", true},
		{"header matcher name with CR", matching(&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, Headers: []*routev3.HeaderMatcher{{Name: "x\r", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}}}}), "HeaderMatcher.Name", false},
		{"empty query parameter name", matching(&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, QueryParameters: []*routev3.QueryParameterMatcher{{QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_PresentMatch{PresentMatch: true}}}}), "QueryParameterMatcher.Name", false},
		{"group named (?<name>) in a header regex", matching(headerRegex("(?<id>[0-9]+)")), "invalid perl operator: (?<", false},
		{"empty regex", matching(headerRegex("")), "RegexMatcher.Regex", false},
		{"prefix rewrite with LF", withAction(func(a *routev3.RouteAction) { a.PrefixRewrite = "/a\nb" }), "RouteAction.PrefixRewrite", false},
		{"negative timeout", withAction(func(a *routev3.RouteAction) { a.Timeout = &durationpb.Duration{Seconds: -1} }), "expected positive duration", false},
		{"unmodelled field: request mirroring", withAction(func(a *routev3.RouteAction) {
			a.RequestMirrorPolicies = []*routev3.RouteAction_RequestMirrorPolicy{{Cluster: "a"}}
		}), "RouteConfiguration.virtual_hosts[0].routes[0].route.request_mirror_policies", true},
		{"unmodelled field: a virtual host's require_tls", routesWith(&routev3.VirtualHost{Name: "a", Domains: []string{"*"}, RequireTls: routev3.VirtualHost_ALL}), "virtual_hosts[0].require_tls", true},
		{"duplicate domain across virtual hosts", routesWith(vhost("a", []string{"a.com"}, toRoute("a")), vhost("b", []string{"A.com"}, toRoute("a"))), "only unique values for domains", false},
		{"duplicate domain in one virtual host", routesWith(vhost("a", []string{"a.com:80", "a.com:80"}, toRoute("a"))), "only unique values for domains", false},
		{"duplicate suffix wildcard", routesWith(vhost("a", []string{"*.a.com"}, toRoute("a")), vhost("b", []string{"*.a.com"}, toRoute("a"))), "only unique values for domains", false},
		{"duplicate prefix wildcard", routesWith(vhost("a", []string{"a.*"}, toRoute("a")), vhost("b", []string{"a.*"}, toRoute("a"))), "only unique values for domains", false},
		{"two default virtual hosts", routesWith(vhost("a", []string{"*"}, toRoute("a")), vhost("b", []string{"*"}, toRoute("a"))), "only a single wildcard domain", false},
		{"weights summing to 0", routesWith(vhost("a", []string{"*"}, &routev3.Route{Match: toRoute("").GetMatch(), Action: weighted(weight("a", 0), weight("b", 0))})), "must be greater than 0", false},
		{"unknown cluster with validate_clusters", validated, "unknown cluster", false},
		{"Host header mutation", routesWith(vhost("a", []string{"*"}, withHeaders(toRoute("a"), []*corev3.HeaderValueOption{header("Host", "x", false)}, nil))), "may not be modified", false},
		{"pseudo-header removal", routesWith(vhost("a", []string{"*"}, withHeaders(toRoute("a"), nil, []string{":path"}))), "may not be removed", false},
		{"lone % in a header value", routesWith(vhost("a", []string{"*"}, withHeaders(toRoute("a"), []*corev3.HeaderValueOption{header("x", "100%", false)}, nil))), "un-terminated", false},
		{"regex that does not compile", routesWith(vhost("a", []string{"*"}, &routev3.Route{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "(("}}}, Action: toCluster("a")})), "regex", false},
		{"prefix and regex rewrite", routesWith(vhost("a", []string{"*"}, bothRewrites)), "both prefix_rewrite and regex_rewrite", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newState()
			good := routesWith(vhost("good", []string{"*"}, toRoute("a")))
			if err := st.apply(response(t, RouteType, map[string]proto.Message{"80": good})); err != nil {
				t.Fatal(err)
			}
			err := st.apply(response(t, RouteType, map[string]proto.Message{"80": tt.rc}))
			if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want a rejection saying %q", err, tt.want)
			}
			if errors.Is(err, ErrNotModelled) != tt.notModelled {
				t.Errorf("error %v: not modelled is %v, want %v", err, errors.Is(err, ErrNotModelled), tt.notModelled)
			}
			if !proto.Equal(st.config().Routes["80"], good) {
				t.Error("the refused configuration replaced the last accepted one")
			}
		})
	}
}

// What Envoy accepts in route configurations, next to the rules above.
func TestRouteConfigurationsEnvoyAccepts(t *testing.T) {
	tests := []struct {
		name string
		rc   *routev3.RouteConfiguration
	}{
		{"exact and wildcard of one name", routesWith(vhost("a", []string{"a.com", "*.a.com", "a.*"}, toRoute("a")), vhost("b", []string{"*a.com"}, toRoute("a")))},
		{"same name with and without a port", routesWith(vhost("a", []string{"a.com"}, toRoute("a")), vhost("b", []string{"a.com:80"}, toRoute("a")))},
		// Without validate_clusters (the RDS default) an unknown cluster is accepted.
		{"unknown cluster", routesWith(vhost("a", []string{"*"}, toRoute("gone")))},
		{"escaped %", routesWith(vhost("a", []string{"*"}, withHeaders(toRoute("a"), []*corev3.HeaderValueOption{header("x", "100%%", false)}, nil)))},
		{"a value with a tab", routesWith(vhost("a", []string{"*"}, withHeaders(toRoute("a"), []*corev3.HeaderValueOption{header("x", "a\tb", false)}, nil)))},
		{"a group named (?P<name>)", routesWith(vhost("a", []string{"*"}, &routev3.Route{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: `/(?P<id>[0-9]+)\(?<`}}}, Action: toCluster("a")}))},
		{"what Consul sets on a route action", routesWith(vhost("a", []string{"*"}, consulAction()))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := newState().apply(response(t, RouteType, map[string]proto.Message{"80": tt.rc})); err != nil {
				t.Error(err)
			}
		})
	}
}

// consulAction is a route with every route action field Consul 1.15 may set: a
// timeout and idle timeout (service-resolver, service-router), a retry policy and hash
// policies (service-router, service-resolver).
func consulAction() *routev3.Route {
	r := toRoute("a")
	a := r.GetRoute()
	a.Timeout, a.IdleTimeout = durationpb.New(5e9), durationpb.New(0)
	a.RetryPolicy = &routev3.RetryPolicy{NumRetries: wrapperspb.UInt32(3), RetryOn: "connect-failure,retriable-status-codes", RetriableStatusCodes: []uint32{503}}
	a.HashPolicy = []*routev3.RouteAction_HashPolicy{
		{PolicySpecifier: &routev3.RouteAction_HashPolicy_Header_{Header: &routev3.RouteAction_HashPolicy_Header{HeaderName: "x-user"}}},
		{PolicySpecifier: &routev3.RouteAction_HashPolicy_Cookie_{Cookie: &routev3.RouteAction_HashPolicy_Cookie{Name: "c", Path: "/", Ttl: durationpb.New(0)}}, Terminal: true},
		{PolicySpecifier: &routev3.RouteAction_HashPolicy_ConnectionProperties_{ConnectionProperties: &routev3.RouteAction_HashPolicy_ConnectionProperties{SourceIp: true}}},
	}
	return r
}

// Each case is a listener set Envoy's listener manager refuses
// (source/server/filter_chain_manager_impl.cc, listener_manager_impl.cc).
func TestListenersEnvoyRefuses(t *testing.T) {
	withMatch := func(c *listenerv3.FilterChain, m *listenerv3.FilterChainMatch) *listenerv3.FilterChain {
		c.FilterChainMatch = m
		return c
	}
	tests := []struct {
		name      string
		listeners map[string]proto.Message
		want      string
	}{
		{"two chains without match criteria", map[string]proto.Message{"l": listener(t, "l", 443, chain(t, tcpFilter(t, "a"), true), chain(t, tcpFilter(t, "b"), true))}, "same matching rules"},
		{"same server name in two chains", map[string]proto.Message{"l": listener(t, "l", 443, chain(t, tcpFilter(t, "a"), true, "a.com", "b.com"), chain(t, tcpFilter(t, "b"), true, "B.com"))}, "same matching rules"},
		{"partial wildcard server name", map[string]proto.Message{"l": listener(t, "l", 443, chain(t, tcpFilter(t, "a"), true, "*a.com"))}, "partial wildcards"},
		{"two listeners on one address", map[string]proto.Message{"l1": listener(t, "l1", 80, chain(t, tcpFilter(t, "a"), false)), "l2": listener(t, "l2", 80, chain(t, tcpFilter(t, "a"), false))}, "duplicate address"},
		{"unimplemented address_suffix", map[string]proto.Message{"l": listener(t, "l", 80, withMatch(chain(t, tcpFilter(t, "a"), false), &listenerv3.FilterChainMatch{AddressSuffix: "x"}))}, "unimplemented"},
		{"router not last", map[string]proto.Message{"l": listener(t, "l", 80, chain(t, routerFirst(t), false))}, "must be the last filter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := newState().apply(response(t, ListenerType, tt.listeners))
			if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want a rejection saying %q", err, tt.want)
			}
		})
	}
}

// routerFirst is an HTTP connection manager whose router is followed by another filter.
func routerFirst(t testing.TB) *listenerv3.Filter {
	f := hcm(t, "80")
	h := mustUnmarshalHCM(t, f)
	h.HttpFilters = append(h.HttpFilters, h.HttpFilters[0])
	f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, h)}
	return f
}

func TestListenersEnvoyAccepts(t *testing.T) {
	tlsOnly := chain(t, tcpFilter(t, "a"), true)
	tlsOnly.FilterChainMatch = &listenerv3.FilterChainMatch{TransportProtocol: "tls"}
	listeners := map[string]proto.Message{
		"sni":   listener(t, "sni", 443, chain(t, tcpFilter(t, "a"), true, "a.com"), chain(t, tcpFilter(t, "b"), true, "*.a.com"), chain(t, tcpFilter(t, "c"), false), tlsOnly),
		"other": listener(t, "other", 8443, chain(t, tcpFilter(t, "a"), true)),
	}
	if err := newState().apply(response(t, ListenerType, listeners)); err != nil {
		t.Error(err)
	}
}

// Check: what Envoy accepts but a gateway must never be sent.
func TestCheck(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(t *testing.T, c *Config)
		want   string
	}{
		{"route to a cluster CDS did not send", func(t *testing.T, c *Config) {
			c.Routes["80"].VirtualHosts[0].Routes = append(c.Routes["80"].VirtualHosts[0].Routes, toRoute("gone"))
		}, `cluster "gone"`},
		{"weighted cluster CDS did not send", func(t *testing.T, c *Config) {
			c.Routes["80"].VirtualHosts[0].Routes[0].Action = weighted(weight("a", 1), weight("gone", 1))
		}, `cluster "gone"`},
		{"TCP proxy to a cluster CDS did not send", func(t *testing.T, c *Config) {
			c.Listeners["tcp"] = listener(t, "tcp", 5432, chain(t, tcpFilter(t, "gone"), false))
		}, `cluster "gone"`},
		{"two virtual hosts with one name", func(t *testing.T, c *Config) {
			c.Routes["80"].VirtualHosts = append(c.Routes["80"].VirtualHosts, vhost("a", []string{"b.com"}, toRoute("a")))
		}, "used twice"},
		{"wildcard inside a domain", func(t *testing.T, c *Config) {
			c.Routes["80"].VirtualHosts[0].Domains = []string{"a.*.com"}
		}, "wildcard Envoy does not support"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := httpConfig(t, routesWith(vhost("a", []string{"*"}, toRoute("a"))), "a")
			if err := c.Check(); err != nil {
				t.Fatalf("the base configuration: %v", err)
			}
			tt.mutate(t, c)
			if err := c.Check(); !errors.Is(err, ErrInconsistent) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want an inconsistency saying %q", err, tt.want)
			}
		})
	}
}
