package envoy

import (
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

// Endpoint health, from the load balancing docs: healthy (and unknown) hosts take the
// load; degraded ones take what the healthy cannot; unhealthy, draining and timed-out
// ones none, unless fewer hosts than the panic threshold (50% by default; Consul sets
// 0, which disables it) are available, when all hosts share the load.
func TestServeHTTPEndpointHealth(t *testing.T) {
	const (
		h  = corev3.HealthStatus_HEALTHY
		u  = corev3.HealthStatus_UNHEALTHY
		dr = corev3.HealthStatus_DRAINING
		un = corev3.HealthStatus_UNKNOWN
		dg = corev3.HealthStatus_DEGRADED
	)
	defaultThreshold := (*clusterv3.Cluster_CommonLbConfig)(nil)
	threshold := func(p float64) *clusterv3.Cluster_CommonLbConfig {
		return &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{Value: p}}
	}
	tests := []struct {
		name   string
		common *clusterv3.Cluster_CommonLbConfig
		hosts  []host
		want   []string // the endpoints that may be picked; none: 503
	}{
		{"unhealthy excluded", noPanic, []host{{"10.0.0.1", h}, {"10.0.0.2", u}}, []string{"10.0.0.1"}},
		{"unknown counts as healthy", noPanic, []host{{"10.0.0.1", un}, {"10.0.0.2", dr}}, []string{"10.0.0.1"}},
		{"degraded when nothing is healthy", noPanic, []host{{"10.0.0.1", dg}, {"10.0.0.2", u}}, []string{"10.0.0.1"}},
		{"no healthy host, no panic", noPanic, []host{{"10.0.0.1", u}}, nil},
		{"no host at all", defaultThreshold, nil, nil},
		{"half healthy is not panic", defaultThreshold, []host{{"10.0.0.1", h}, {"10.0.0.2", u}}, []string{"10.0.0.1"}},
		{"panic under 50%", defaultThreshold, []host{{"10.0.0.1", h}, {"10.0.0.2", u}, {"10.0.0.3", u}}, []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}},
		{"panic with none healthy", defaultThreshold, []host{{"10.0.0.1", u}}, []string{"10.0.0.1"}},
		{"panic threshold above what can take all load", threshold(80), []host{{"10.0.0.1", h}, {"10.0.0.2", h}, {"10.0.0.3", h}, {"10.0.0.4", u}}, []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := httpConfig(t, &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{vhost("a", []string{"*"}, toRoute("a"))}}, "a")
			c.Clusters["a"] = edsCluster("a", tt.common)
			c.Endpoints["a"] = assignment("a", tt.hosts...)
			seen := map[string]bool{}
			rnd := seeded()
			for range 200 {
				got, err := ServeHTTP(c, HTTPRequest{Port: 80, Host: "x", Target: "/"}, rnd)
				if err != nil {
					t.Fatal(err)
				}
				if (got.Status == 200) != (tt.want != nil) {
					t.Fatalf("status %d, want endpoints %v", got.Status, tt.want)
				}
				if got.Status == 200 {
					seen[got.Endpoint[:len(got.Endpoint)-len(":20000")]] = true
				}
			}
			var got []string
			for e := range seen {
				got = append(got, e)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("picked %v, want %v", got, tt.want)
			}
		})
	}
}

// Consul's blackhole cluster: an assignment with an empty locality; Envoy answers 503.
func TestServeHTTPEmptyLocality(t *testing.T) {
	c := httpConfig(t, &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{vhost("a", []string{"*"}, toRoute("a"))}}, "a")
	c.Endpoints["a"] = &endpointv3.ClusterLoadAssignment{ClusterName: "a", Endpoints: []*endpointv3.LocalityLbEndpoints{{}}}
	got, err := ServeHTTP(c, HTTPRequest{Port: 80, Host: "x", Target: "/"}, seeded())
	if err != nil || got.Status != 503 || got.Cluster != "a" {
		t.Errorf("got %+v, %v; want 503 from cluster a", got, err)
	}
}
