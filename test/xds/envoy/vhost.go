package envoy

import (
	"cmp"
	"slices"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// findVirtualHost picks the virtual host for a Host header the way RouteMatcher does
// (source/common/router/config_impl.cc, RouteMatcher::findVirtualHost; the order is
// documented on VirtualHost.domains in route_components.proto):
//
//   - with only a "*" virtual host, that one, whatever the host;
//   - otherwise the lower-cased host (with its port, unless the route configuration
//     sets ignore_port_in_host_matching) is looked up as an exact domain, then against
//     suffix wildcards from the longest, then prefix wildcards from the longest, then
//     "*". A wildcard never matches an empty part: "*.example.com" does not match
//     ".example.com".
//
// A domain "example.com:8080" is an exact domain like any other: it matches only a
// Host header carrying that port.
func findVirtualHost(rc *routev3.RouteConfiguration, host string) *routev3.VirtualHost {
	var def *routev3.VirtualHost
	exact := map[string]*routev3.VirtualHost{}
	var suffixes, prefixes []wildcard
	for _, vh := range rc.GetVirtualHosts() {
		for _, d := range vh.GetDomains() {
			d = strings.ToLower(d)
			switch {
			case d == "*":
				def = vh
			case strings.HasPrefix(d, "*"):
				suffixes = append(suffixes, wildcard{d[1:], vh})
			case strings.HasSuffix(d, "*"):
				prefixes = append(prefixes, wildcard{d[:len(d)-1], vh})
			default:
				exact[d] = vh
			}
		}
	}
	if len(exact) == 0 && len(suffixes) == 0 && len(prefixes) == 0 {
		return def
	}
	if host == "" {
		return nil
	}
	if rc.GetIgnorePortInHostMatching() {
		host = stripPort(host)
	}
	host = strings.ToLower(host)
	if vh := exact[host]; vh != nil {
		return vh
	}
	if vh := longestWildcard(suffixes, host, strings.HasSuffix); vh != nil {
		return vh
	}
	if vh := longestWildcard(prefixes, host, strings.HasPrefix); vh != nil {
		return vh
	}
	return def
}

type wildcard struct {
	part string
	vh   *routev3.VirtualHost
}

func longestWildcard(ws []wildcard, host string, has func(s, part string) bool) *routev3.VirtualHost {
	slices.SortStableFunc(ws, func(a, b wildcard) int { return cmp.Compare(len(b.part), len(a.part)) })
	for _, w := range ws {
		if len(w.part) < len(host) && has(host, w.part) {
			return w.vh
		}
	}
	return nil
}

// stripPort removes a port from a host the way HeaderUtility::getPortStart finds it:
// after the last ":", unless that ":" is inside an IPv6 literal's brackets.
func stripPort(host string) string {
	i := strings.LastIndexByte(host, ':')
	if i < 0 {
		return host
	}
	if j := strings.LastIndexByte(host, ']'); j > i {
		return host
	}
	return host[:i]
}
