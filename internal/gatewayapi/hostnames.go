package gatewayapi

import (
	"strings"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// HostnameIntersection returns the more specific of a listener and a route hostname
// when they overlap; an empty listener hostname overlaps everything. It is the Gateway
// API's rule, and the Consul translation uses it too.
func HostnameIntersection(listener, route gatewayv1.Hostname) (gatewayv1.Hostname, bool) {
	switch {
	case listener == "", listener == route:
		return route, true
	case WildcardMatches(listener, route):
		return route, true
	case WildcardMatches(route, listener):
		return listener, true
	}
	return "", false
}

// WildcardMatches reports whether pattern is a wildcard ("*.example.com") that matches
// host, which may itself be a narrower wildcard ("*.foo.example.com"). The wildcard
// stands for at least one label, so host needs a non-empty part before the suffix;
// matching on ".example.com" (with the dot) keeps "badexample.com" out.
func WildcardMatches(pattern, host gatewayv1.Hostname) bool {
	suffix, isWildcard := strings.CutPrefix(string(pattern), "*")
	if !isWildcard {
		return false
	}
	labels, found := strings.CutSuffix(string(host), suffix)
	return found && labels != ""
}
