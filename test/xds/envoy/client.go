package envoy

import (
	"context"
	"fmt"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

// The xDS resource types a gateway's Envoy asks for.
const (
	ClusterType  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	EndpointType = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	ListenerType = "type.googleapis.com/envoy.config.listener.v3.Listener"
	RouteType    = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
)

// envoyVersion is the Envoy the client claims to be: Consul 1.15 serves only the Envoy
// releases it supports, 1.22 to 1.25.
var envoyVersion = &corev3.BuildVersion{Version: &typev3.SemanticVersion{MajorNumber: 1, MinorNumber: 25, Patch: 4}}

// Proxy names the gateway instance the client speaks for: the catalog registration's
// service ID and node, as consul-dataplane sends them.
type Proxy struct {
	ID   string
	Node string
}

// Config is everything Consul served one proxy, by type and resource name.
type Config struct {
	Clusters  map[string]*clusterv3.Cluster
	Endpoints map[string]*endpointv3.ClusterLoadAssignment
	Listeners map[string]*listenerv3.Listener
	Routes    map[string]*routev3.RouteConfiguration
}

// Fetch acts as the proxy's Envoy for one configuration: it watches what Consul
// serves (Watch) and returns the first complete configuration (Watcher.Config), or why
// there is none: a broken stream, a response Envoy would refuse, an inconsistency.
func Fetch(ctx context.Context, grpcAddr string, proxy Proxy, quiet time.Duration) (*Config, error) {
	return FetchWith(ctx, grpcAddr, proxy, DialOptions{}, quiet)
}

// FetchWith is Fetch with dial options: a token, TLS or both (WatchWith).
func FetchWith(ctx context.Context, grpcAddr string, proxy Proxy, opts DialOptions, quiet time.Duration) (*Config, error) {
	w := WatchWith(ctx, grpcAddr, proxy, opts)
	defer w.Close()
	return w.Config(ctx, quiet)
}

// ConnectionManagers are the HTTP connection managers of a listener's filter chains,
// the default filter chain included.
func ConnectionManagers(l *listenerv3.Listener) ([]*hcmv3.HttpConnectionManager, error) {
	var out []*hcmv3.HttpConnectionManager
	for _, chain := range allChains(l) {
		for _, f := range chain.GetFilters() {
			h, ok, err := connectionManager(f)
			if err != nil {
				return nil, fmt.Errorf("listener %s: %w", l.GetName(), err)
			}
			if ok {
				out = append(out, h)
			}
		}
	}
	return out, nil
}
