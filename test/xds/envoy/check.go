package envoy

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
)

// ErrInconsistent marks configuration Envoy accepts but that cannot be what the
// control plane meant: Envoy takes it and misbehaves at request time.
var ErrInconsistent = errors.New("inconsistent configuration")

// Check reports what Envoy accepts (it ACKs) but a gateway should never be sent:
//
//   - A route or TCP proxy naming a cluster CDS did not send. Envoy checks RDS route
//     tables against clusters only when validate_clusters is set (it defaults to false
//     for RDS); otherwise the router answers such requests with the route's
//     cluster_not_found_response_code, 503 by default, and the TCP proxy closes the
//     connection. (api/envoy/config/route/v3/route.proto validate_clusters,
//     route_components.proto cluster_not_found_response_code.)
//   - Two virtual hosts of one route configuration with the same name: Envoy does not
//     refuse it (RouteMatcher keys virtual hosts by domain only), but their statistics
//     and any VHDS update would mix them up.
//   - A domain with "*" neither first nor last, or more than one "*": only prefix and
//     suffix wildcards are supported (route_components.proto, VirtualHost.domains);
//     Envoy files anything else as an exact name, which matches no real host.
func (c *Config) Check() error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(c.Routes)) {
		errs = append(errs, checkRouteConfig(c.Routes[name], c))
	}
	for _, name := range slices.Sorted(maps.Keys(c.Listeners)) {
		errs = append(errs, checkListener(c.Listeners[name], c))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInconsistent, err)
	}
	return nil
}

func checkRouteConfig(rc *routev3.RouteConfiguration, c *Config) error {
	var errs []error
	names := map[string]bool{}
	for _, vh := range rc.GetVirtualHosts() {
		if names[vh.GetName()] {
			errs = append(errs, fmt.Errorf("route configuration %q: virtual host name %q is used twice", rc.GetName(), vh.GetName()))
		}
		names[vh.GetName()] = true
		for _, d := range vh.GetDomains() {
			if !supportedDomain(d) {
				errs = append(errs, fmt.Errorf("route configuration %q: virtual host %q: domain %q has a wildcard Envoy does not support", rc.GetName(), vh.GetName(), d))
			}
		}
		for _, r := range vh.GetRoutes() {
			for _, cluster := range routeClusters(r.GetRoute()) {
				if c.Clusters[cluster] == nil {
					errs = append(errs, fmt.Errorf("route configuration %q: virtual host %q routes to cluster %q, which CDS did not send", rc.GetName(), vh.GetName(), cluster))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// supportedDomain: "*", or at most one "*", first or last.
func supportedDomain(d string) bool {
	n := strings.Count(d, "*")
	return n == 0 || d == "*" || n == 1 && (strings.HasPrefix(d, "*") || strings.HasSuffix(d, "*"))
}

func routeClusters(a *routev3.RouteAction) []string {
	var out []string
	if a.GetCluster() != "" {
		out = append(out, a.GetCluster())
	}
	for _, wc := range a.GetWeightedClusters().GetClusters() {
		if wc.GetName() != "" {
			out = append(out, wc.GetName())
		}
	}
	return out
}

func checkListener(l *listenerv3.Listener, c *Config) error {
	var errs []error
	for _, chain := range allChains(l) {
		for _, f := range chain.GetFilters() {
			p, err := tcpProxy(f)
			if err != nil || p == nil {
				errs = append(errs, err)
				continue
			}
			for _, cluster := range tcpClusters(p) {
				if c.Clusters[cluster] == nil {
					errs = append(errs, fmt.Errorf("listener %q: TCP proxy to cluster %q, which CDS did not send", l.GetName(), cluster))
				}
			}
		}
	}
	return errors.Join(errs...)
}

func tcpClusters(p *tcpproxyv3.TcpProxy) []string {
	if p.GetCluster() != "" {
		return []string{p.GetCluster()}
	}
	var out []string
	for _, wc := range p.GetWeightedClusters().GetClusters() {
		out = append(out, wc.GetName())
	}
	return out
}
