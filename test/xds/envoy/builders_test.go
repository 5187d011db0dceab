package envoy

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Builders of the resources Consul sends, small enough to read in a test table.

func mustAny(t testing.TB, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// hcm is an HTTP connection manager filter with only the router, reading rds by RDS.
func hcm(t testing.TB, rds string, mutate ...func(*hcmv3.HttpConnectionManager)) *listenerv3.Filter {
	h := &hcmv3.HttpConnectionManager{
		StatPrefix:     "test",
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{RouteConfigName: rds, ConfigSource: &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}}},
		HttpFilters:    []*hcmv3.HttpFilter{{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &routerv3.Router{})}}},
	}
	for _, m := range mutate {
		m(h)
	}
	return &listenerv3.Filter{Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, h)}}
}

func tcpFilter(t testing.TB, cluster string) *listenerv3.Filter {
	p := &tcpproxyv3.TcpProxy{StatPrefix: "test", ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: cluster}}
	return &listenerv3.Filter{Name: "envoy.filters.network.tcp_proxy", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, p)}}
}

func tlsSocket(t testing.TB) *corev3.TransportSocket {
	return &corev3.TransportSocket{Name: "tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(t, &tlsv3.DownstreamTlsContext{})}}
}

// chain is a filter chain; TLS when tls, matching server names if any.
func chain(t testing.TB, f *listenerv3.Filter, tls bool, serverNames ...string) *listenerv3.FilterChain {
	c := &listenerv3.FilterChain{Filters: []*listenerv3.Filter{f}}
	if len(serverNames) > 0 {
		c.FilterChainMatch = &listenerv3.FilterChainMatch{ServerNames: serverNames}
	}
	if tls {
		c.TransportSocket = tlsSocket(t)
	}
	return c
}

// listener binds 10.0.0.1:port with a TLS inspector, as Consul's gateway listeners do.
func listener(t testing.TB, name string, port uint32, chains ...*listenerv3.FilterChain) *listenerv3.Listener {
	return &listenerv3.Listener{
		Name:            name,
		Address:         &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{Address: "10.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}},
		FilterChains:    chains,
		ListenerFilters: []*listenerv3.ListenerFilter{{Name: "envoy.filters.listener.tls_inspector", ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAny(t, &tlsinspectorv3.TlsInspector{})}}},
	}
}

// noPanic is what Consul sets: a panic threshold of 0, no panic mode.
var noPanic = &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{}}

func edsCluster(name string, common *clusterv3.Cluster_CommonLbConfig) *clusterv3.Cluster {
	return &clusterv3.Cluster{Name: name, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS}, CommonLbConfig: common,
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}}}
}

type host struct {
	ip     string
	status corev3.HealthStatus
}

func healthy(ip string) host { return host{ip, corev3.HealthStatus_HEALTHY} }

func assignment(cluster string, hosts ...host) *endpointv3.ClusterLoadAssignment {
	l := &endpointv3.LocalityLbEndpoints{}
	for _, h := range hosts {
		l.LbEndpoints = append(l.LbEndpoints, &endpointv3.LbEndpoint{
			HealthStatus: h.status,
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
				SocketAddress: &corev3.SocketAddress{Address: h.ip, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 20000}},
			}}}},
		})
	}
	return &endpointv3.ClusterLoadAssignment{ClusterName: cluster, Endpoints: []*endpointv3.LocalityLbEndpoints{l}}
}

// config has each cluster with one healthy endpoint 10.2.0.<i+1>.
func config(clusters ...string) *Config {
	c := &Config{Clusters: map[string]*clusterv3.Cluster{}, Endpoints: map[string]*endpointv3.ClusterLoadAssignment{},
		Listeners: map[string]*listenerv3.Listener{}, Routes: map[string]*routev3.RouteConfiguration{}}
	for i, name := range clusters {
		c.Clusters[name] = edsCluster(name, noPanic)
		c.Endpoints[name] = assignment(name, healthy(ip(i)))
	}
	return c
}

func ip(i int) string { return "10.2.0." + string(rune('1'+i)) }

// httpConfig serves rc on port 80 by RDS, with clusters.
func httpConfig(t testing.TB, rc *routev3.RouteConfiguration, clusters ...string) *Config {
	c := config(clusters...)
	rc.Name = "80"
	c.Routes["80"] = rc
	c.Listeners["http"] = listener(t, "http", 80, chain(t, hcm(t, "80"), false))
	return c
}

func vhost(name string, domains []string, routes ...*routev3.Route) *routev3.VirtualHost {
	return &routev3.VirtualHost{Name: name, Domains: domains, Routes: routes}
}

func header(key, value string, appendValue bool) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: key, Value: value}, Append: wrapperspb.Bool(appendValue)} //nolint:staticcheck // what Consul 1.15 sends
}

func weighted(clusters ...*routev3.WeightedCluster_ClusterWeight) *routev3.Route_Route {
	return &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_WeightedClusters{
		WeightedClusters: &routev3.WeightedCluster{Clusters: clusters},
	}}}
}

func weight(name string, w uint32) *routev3.WeightedCluster_ClusterWeight {
	return &routev3.WeightedCluster_ClusterWeight{Name: name, Weight: wrapperspb.UInt32(w)}
}

func mustUnmarshalHCM(t testing.TB, f *listenerv3.Filter) *hcmv3.HttpConnectionManager {
	t.Helper()
	h, ok, err := connectionManager(f)
	if err != nil || !ok {
		t.Fatalf("not an HTTP connection manager: %v", err)
	}
	return h
}
