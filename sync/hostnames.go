package sync

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// intersectHostnames returns the hostnames a route serves through a listener, per the
// Gateway API rules (HTTPRouteSpec.Hostnames, Listener.Hostname):
//
//   - a listener without hostname accepts every route hostname;
//   - a route without hostnames takes the listener's hostname (or matches everything
//     when both are empty);
//   - a wildcard "*.example.com" on either side matches one or more labels in its
//     place: "foo.example.com" and "foo.bar.example.com", never "example.com";
//   - route hostnames that do not intersect are ignored, and ok is false when route
//     hostnames are set and none intersect (the route is then not accepted, reason
//     NoMatchingListenerHostname).
//
// For each route hostname that intersects it returns the more specific of the two,
// deduplicated, in route order. Both empty: (nil, true).
//
// Note that Consul 1.15 rejects wildcard hostnames on an http-route
// (Consul 1.15.4 agent/structs/config_entry_routes.go:135), so a wildcard in the result must reach Consul through
// the listener, not the route entry.
func intersectHostnames(listener *gatewayv1.Hostname, route []gatewayv1.Hostname) (hosts []gatewayv1.Hostname, ok bool) {
	var listenerHost gatewayv1.Hostname
	if listener != nil {
		listenerHost = *listener
	}
	if len(route) == 0 {
		if listenerHost == "" {
			return nil, true
		}
		return []gatewayv1.Hostname{listenerHost}, true
	}
	for _, routeHost := range route {
		host, ok := gatewayapi.HostnameIntersection(listenerHost, routeHost)
		if !ok || slices.Contains(hosts, host) {
			continue
		}
		hosts = append(hosts, host)
	}
	return hosts, len(hosts) > 0
}

// isIPAddress reports whether h is an IP address. Gateway API allows only DNS names as
// listener and route hostnames ("IPs are not allowed"), but the CRDs' pattern lets a
// dotted IPv4 address through.
func isIPAddress(h gatewayv1.Hostname) bool {
	_, err := netip.ParseAddr(string(h))
	return err == nil
}

// ipHostnames returns the hostnames that are IP addresses.
func ipHostnames(hosts []gatewayv1.Hostname) []gatewayv1.Hostname {
	var ips []gatewayv1.Hostname
	for _, h := range hosts {
		if isIPAddress(h) {
			ips = append(ips, h)
		}
	}
	return ips
}

// routeHostnamesProblem says why a route's hostnames cannot be served, "" when they
// can: IP addresses among them refuse the whole route, since serving the rest would
// serve less than it asks for.
func routeHostnamesProblem(hosts []gatewayv1.Hostname) string {
	ips := ipHostnames(hosts)
	if len(ips) == 0 {
		return ""
	}
	quoted := make([]string, len(ips))
	for i, ip := range ips {
		quoted[i] = strconv.Quote(string(ip))
	}
	verb := "is an IP address"
	if len(ips) > 1 {
		verb = "are IP addresses"
	}
	return fmt.Sprintf("spec.hostnames %s %s; Gateway API allows only DNS names as route hostnames, so nothing of the route is served", strings.Join(quoted, ", "), verb)
}
