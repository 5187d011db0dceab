package xds

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/xds/envoy"
)

// The checks of a scenario's configuration against what its objects mean.

// checkBlackholeEmpty: the blackhole's cluster has no endpoints, so what is routed
// there gets Envoy's 503 instead of reaching anything.
func checkBlackholeEmpty(cfg *envoy.Config) error {
	for name, c := range cfg.Clusters {
		if serviceOf(name) != blackhole {
			continue
		}
		if got := endpointAddresses(cfg.Endpoints[c.GetName()]); len(got) > 0 {
			return fmt.Errorf("blackhole cluster %s has endpoints %v", name, got)
		}
	}
	return nil
}

// listenerPerPort: one listener per Gateway port, none for any other port.
func listenerPerPort(cfg *envoy.Config, ports []uint32) error {
	count := map[uint32]int{}
	for _, l := range cfg.Listeners {
		count[l.GetAddress().GetSocketAddress().GetPortValue()]++
	}
	want := map[uint32]int{}
	for _, p := range ports {
		want[p] = 1
	}
	if !maps.Equal(count, want) {
		return fmt.Errorf("listeners per port %v, want %v", count, want)
	}
	return nil
}

func listenerOn(cfg *envoy.Config, port uint32) *listenerv3.Listener {
	for _, l := range cfg.Listeners {
		if l.GetAddress().GetSocketAddress().GetPortValue() == port {
			return l
		}
	}
	return nil
}

// routeConfigsOn are the route configurations a port's listener uses.
func routeConfigsOn(cfg *envoy.Config, port uint32) ([]*routev3.RouteConfiguration, error) {
	l := listenerOn(cfg, port)
	if l == nil {
		return nil, fmt.Errorf("no listener on port %d", port)
	}
	hcms, err := envoy.ConnectionManagers(l)
	if err != nil {
		return nil, err
	}
	var out []*routev3.RouteConfiguration
	for _, h := range hcms {
		name := h.GetRds().GetRouteConfigName()
		rc := cfg.Routes[name]
		if rc == nil {
			return nil, fmt.Errorf("listener on port %d names route configuration %q, which Consul did not send", port, name)
		}
		out = append(out, rc)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("listener on port %d has no HTTP connection manager", port)
	}
	return out, nil
}

func checkRequest(cfg *envoy.Config, rc routeCase) error {
	rcs, err := routeConfigsOn(cfg, rc.port)
	if err != nil {
		return fmt.Errorf("%s: %w", rc.req, err)
	}
	// Every filter chain of the port (one per SNI name on TLS listeners) must agree.
	for _, routes := range rcs {
		got, ok, err := envoy.Route(routes, rc.req)
		if err != nil {
			return fmt.Errorf("%s: %w", rc.req, err)
		}
		if err := rc.want.matches(got, ok, rc.req); err != nil {
			return fmt.Errorf("%s on port %d (route configuration %s): %w", rc.req, rc.port, routes.GetName(), err)
		}
	}
	if err := serveRequest(cfg, rc); err != nil {
		return fmt.Errorf("%s on port %d, served: %w", rc.req, rc.port, err)
	}
	return nil
}

// serveRequest sends the request through the whole data path as Envoy would serve it
// (ServeHTTP), a number of times: every answer must be the scenario's, and every
// backend with a share must answer at least once.
func serveRequest(cfg *envoy.Config, rc routeCase) error {
	req := envoy.HTTPRequest{Port: rc.port, SNI: sniFor(cfg, rc.port, rc.req.Host), Method: rc.req.Method, Host: rc.req.Host, Target: rc.req.Target}
	if len(rc.req.Headers) > 0 {
		req.Headers = map[string][]string{}
		for k, v := range rc.req.Headers {
			req.Headers[k] = []string{v}
		}
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	answered := map[string]bool{}
	for range 50 {
		ans, err := envoy.ServeHTTP(cfg, req, rnd)
		if err != nil {
			return err
		}
		if err := rc.want.answers(ans, rc.req); err != nil {
			return err
		}
		answered[serviceOf(ans.Cluster)] = true
	}
	for backend, share := range rc.want.shares() {
		if share > 0 && !answered[backend] {
			return fmt.Errorf("backend %s never answered in 50 requests", backend)
		}
	}
	return nil
}

func (w *want) shares() map[string]uint32 {
	if w == nil {
		return nil
	}
	return w.backends
}

// answers: no route is Envoy's 404; the blackhole, without endpoints, its 503; any
// other backend answers 200 with the path and headers the scenario expects.
func (w *want) answers(ans envoy.HTTPAnswer, req envoy.Request) error {
	service := serviceOf(ans.Cluster)
	switch {
	case w == nil && ans.Status == 404:
		return nil
	case w == nil:
		return fmt.Errorf("status %d from %s, want 404", ans.Status, ans.Cluster)
	case w.backends[service] == 0:
		return fmt.Errorf("answered by %s, want one of %v", ans.Cluster, w.backends)
	case service == blackhole && ans.Status == 503:
		return nil
	case ans.Status != 200:
		return fmt.Errorf("status %d from %s, want 200", ans.Status, ans.Cluster)
	}
	path, query, hasQuery := strings.Cut(req.Target, "?")
	if w.path != "" {
		path = w.path
	}
	if hasQuery {
		path += "?" + query
	}
	if ans.Path != path {
		return fmt.Errorf("backend receives %q, want %q", ans.Path, path)
	}
	for name, value := range w.headers {
		if got := strings.Join(ans.Headers[name], ","); got != value {
			return fmt.Errorf("backend receives header %s=%q, want %q", name, got, value)
		}
	}
	for name, value := range w.backendHeaders[service] {
		if got := strings.Join(ans.Headers[name], ","); got != value {
			return fmt.Errorf("backend %s receives header %s=%q, want %q", service, name, got, value)
		}
	}
	return nil
}

// sniFor is the server name a client of a TLS listener sends: the request's host.
func sniFor(cfg *envoy.Config, port uint32, host string) string {
	l := listenerOn(cfg, port)
	for _, chain := range l.GetFilterChains() {
		if chain.GetTransportSocket() != nil {
			name, _, _ := strings.Cut(host, ":")
			return name
		}
	}
	return ""
}

func (w *want) matches(got envoy.Routed, ok bool, req envoy.Request) error {
	switch {
	case w == nil && !ok:
		return nil
	case w == nil:
		return fmt.Errorf("routed to %v, want no route", got.Clusters)
	case !ok:
		return fmt.Errorf("no route, want %v", w.backends)
	}
	shares := map[string]uint32{}
	for cluster, weight := range got.Clusters {
		shares[serviceOf(cluster)] += weight
	}
	if !sameShares(shares, w.backends) {
		return fmt.Errorf("routed to %v, want shares %v", got.Clusters, w.backends)
	}
	path, _, _ := strings.Cut(req.Target, "?")
	if w.path != "" {
		path = w.path
	}
	if got.Path != path {
		return fmt.Errorf("backend receives path %q, want %q", got.Path, path)
	}
	for name, value := range w.headers {
		if got.Headers[name] != value {
			return fmt.Errorf("backend receives header %s=%q, want %q", name, got.Headers[name], value)
		}
	}
	return nil
}

// sameShares compares weights as proportions: Consul turns 80/20 into 8000/2000.
func sameShares(got, want map[string]uint32) bool {
	if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
		return false
	}
	var gotTotal, wantTotal uint64
	for k := range got {
		gotTotal += uint64(got[k])
		wantTotal += uint64(want[k])
	}
	for k := range got {
		if uint64(got[k])*wantTotal != uint64(want[k])*gotTotal {
			return false
		}
	}
	return true
}

// serviceOf is the Consul service of a cluster, of a subset of it or not.
func serviceOf(cluster string) string {
	service, _ := envoy.ServiceOfCluster(cluster)
	return service
}

// checkTCP: the port's listener proxies TCP to the backend's cluster.
func checkTCP(cfg *envoy.Config, port uint32, backend, address string) error {
	clusters, err := tcpClusters(cfg, port)
	if err != nil {
		return err
	}
	if len(clusters) != 1 || serviceOf(clusters[0]) != backend {
		return fmt.Errorf("TCP listener on port %d proxies to %v, want the cluster of %s", port, clusters, backend)
	}
	if got := endpointAddresses(cfg.Endpoints[clusters[0]]); !slices.Equal(got, []string{address}) {
		return fmt.Errorf("cluster %s has endpoints %v, want %s's instance %s", clusters[0], got, backend, address)
	}
	cluster, endpoint, err := envoy.ServeTCP(cfg, port, "", rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		return fmt.Errorf("TCP connection to port %d: %w", port, err)
	}
	if host, _, _ := strings.Cut(endpoint, ":"); serviceOf(cluster) != backend || host != address {
		return fmt.Errorf("TCP connection to port %d reaches %s at %s, want %s at %s", port, cluster, endpoint, backend, address)
	}
	return nil
}

// tcpClusters are the clusters the TCP proxies of the listener on port forward to.
func tcpClusters(cfg *envoy.Config, port uint32) ([]string, error) {
	l := listenerOn(cfg, port)
	if l == nil {
		return nil, fmt.Errorf("no listener on TCP port %d", port)
	}
	var clusters []string
	for _, chain := range l.GetFilterChains() {
		for _, f := range chain.GetFilters() {
			p := &tcpproxyv3.TcpProxy{}
			if tc := f.GetTypedConfig(); tc != nil && tc.MessageIs(p) {
				if err := tc.UnmarshalTo(p); err != nil {
					return nil, err
				}
				clusters = append(clusters, p.GetCluster())
			}
		}
	}
	return clusters, nil
}

// checkEndpoints: each backend cluster Consul sends has the backend's instance.
func checkEndpoints(cfg *envoy.Config, backends map[string]string) error {
	var errs []error
	for name, c := range cfg.Clusters {
		address, ok := backends[serviceOf(name)]
		if !ok {
			continue
		}
		if got := endpointAddresses(cfg.Endpoints[c.GetName()]); !slices.Equal(got, []string{address}) {
			errs = append(errs, fmt.Errorf("cluster %s has endpoints %v, want %s", name, got, address))
		}
	}
	return errors.Join(errs...)
}

func endpointAddresses(cla *endpointv3.ClusterLoadAssignment) []string {
	var out []string
	for _, locality := range cla.GetEndpoints() {
		for _, e := range locality.GetLbEndpoints() {
			out = append(out, e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress())
		}
	}
	slices.Sort(out)
	return out
}

// checkCertificates: every TLS filter chain serves the Secret's certificate.
func checkCertificates(cfg *envoy.Config, certPEM []byte) error {
	served := 0
	for _, l := range cfg.Listeners {
		for _, chain := range l.GetFilterChains() {
			ts := chain.GetTransportSocket().GetTypedConfig()
			if ts == nil {
				continue
			}
			tls := &tlsv3.DownstreamTlsContext{}
			if !ts.MessageIs(tls) {
				continue
			}
			if err := ts.UnmarshalTo(tls); err != nil {
				return err
			}
			certs := tls.GetCommonTlsContext().GetTlsCertificates()
			if len(certs) != 1 || strings.TrimSpace(certs[0].GetCertificateChain().GetInlineString()) != strings.TrimSpace(string(certPEM)) {
				return fmt.Errorf("listener %s serves %d certificates, not the Secret's", l.GetName(), len(certs))
			}
			served++
		}
	}
	if served == 0 {
		return errors.New("no listener serves TLS")
	}
	return nil
}
