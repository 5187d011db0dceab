package translate

import (
	"fmt"
	"slices"
	"strings"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// routeHostnames decides the Hostnames of an http-route entry written to parents. Consul
// 1.15 refuses wildcard route hostnames (Consul 1.15.4 agent/structs/config_entry_routes.go:135), and one entry's
// hostnames apply to every parent, filtered per listener by Consul's own rule
// (consulServedHostnames). So for each parent the hostnames Gateway API serves through
// it (intersectHostnames) are worked out, and one list is looked for that makes Consul
// serve exactly those on every parent:
//
//   - the concrete plan: the union of what every parent serves, when none of that is a
//     wildcard. Route hostnames that intersect no listener are left out: Consul's
//     suffix filter would otherwise serve "example.com" or "badexample.com" on a
//     "*.example.com" listener.
//   - the listener plan: no hostnames, so Consul serves each listener's own hostname.
//     Right exactly where a parent serves its listener's hostname and nothing else,
//     which is what a route wildcard that is as broad as the listener's hostname or
//     broader gives ("*.example.com" on a "*.example.com" or "a.example.com" listener).
//
// A parent neither plan serves exactly (a wildcard route hostname on a listener without
// hostname or with a broader wildcard, or hostnames that parents need differently) is
// left out, with a message: the route is served more narrowly than its status says,
// never more broadly. The plan that keeps more parents wins, the concrete plan on a tie.
func routeHostnames(route []gatewayv1.Hostname, parents []parentListener) ([]string, []parentListener, []droppedParent) {
	if len(route) == 0 {
		return nil, parents, nil // Consul serves each listener's hostname, as Gateway API does
	}
	served := make([][]string, len(parents))
	for i, p := range parents {
		served[i] = minimalHostnames(intersectHostnames(p.hostname, route))
	}
	hosts, keepConcrete := concretePlan(parents, served)
	keepListener := listenerPlan(parents, served)
	if countTrue(keepListener) > countTrue(keepConcrete) {
		hosts, keepConcrete = nil, keepListener
	}
	var kept []parentListener
	var dropped []droppedParent
	for i, p := range parents {
		if keepConcrete[i] {
			kept = append(kept, p)
			continue
		}
		dropped = append(dropped, droppedParent{p.problemParent(), hostnameProblem(p, hosts, served[i])})
	}
	return hosts, kept, dropped
}

// concretePlan returns the union of the hostnames the parents serve and which parents
// Consul then serves exactly. Parents that need a wildcard or are served too much are
// dropped until the rest agree; dropping a parent only shrinks the union, so that ends.
func concretePlan(parents []parentListener, served [][]string) ([]string, []bool) {
	keep := make([]bool, len(parents))
	for i := range parents {
		keep[i] = len(served[i]) > 0 && !slices.ContainsFunc(served[i], isWildcard)
	}
	for {
		var hosts []string
		for i := range parents {
			for _, h := range served[i] {
				if keep[i] && !slices.Contains(hosts, h) {
					hosts = append(hosts, h)
				}
			}
		}
		changed := false
		for i, p := range parents {
			if keep[i] && !sameSet(consulServedHostnames(hosts, p.hostname), served[i]) {
				keep[i], changed = false, true
			}
		}
		if !changed {
			return hosts, keep
		}
	}
}

// listenerPlan returns which parents an entry without hostnames serves exactly: those
// that serve their listener's hostname and nothing else.
func listenerPlan(parents []parentListener, served [][]string) []bool {
	keep := make([]bool, len(parents))
	for i, p := range parents {
		keep[i] = p.hostname != "" && len(served[i]) == 1 && served[i][0] == p.hostname
	}
	return keep
}

// hostnameProblem says why parent p, whose listener serves served, is left out when
// the entry has hostnames hosts.
func hostnameProblem(p parentListener, hosts, served []string) string {
	listener := fmt.Sprintf("listener %s/%s", p.gateway, p.ref.SectionName)
	listenerHost := "no hostname"
	if p.hostname != "" {
		listenerHost = fmt.Sprintf("hostname %q", p.hostname)
	}
	switch {
	case len(served) == 0:
		return fmt.Sprintf("%s: its %s matches none of the route's hostnames; the route is left out of it", listener, listenerHost)
	case slices.ContainsFunc(served, isWildcard):
		return fmt.Sprintf("%s: the route's hostnames there are %v; Consul 1.15 takes no wildcard hostnames on an http-route, and only a listener hostname equal to or narrower than the wildcard can stand in for it (this listener has %s), so the route is left out of this listener", listener, served, listenerHost)
	}
	return fmt.Sprintf("%s: the route's hostnames there are %v, but with the hostnames its other listeners need Consul 1.15 would serve %v (it matches route hostnames to a wildcard listener by suffix); the route is left out of this listener",
		listener, served, consulServedHostnames(hosts, p.hostname))
}

// minimalHostnames drops the hostnames a wildcard in the same list already covers: the
// list serves the same requests without them.
func minimalHostnames(hosts []string) []string {
	var out []string
	for _, h := range hosts {
		if !slices.ContainsFunc(hosts, func(w string) bool {
			return w != h && gatewayapi.WildcardMatches(gatewayv1.Hostname(w), gatewayv1.Hostname(h))
		}) {
			out = append(out, h)
		}
	}
	return out
}

// intersectHostnames returns the hostnames Gateway API serves for a route through a
// listener with hostname listener ("" for any): each route hostname that overlaps the
// listener's, as the more specific of the two, deduplicated, in route order. A wildcard
// stands for one or more labels, so "*.example.com" matches neither "example.com" nor
// "badexample.com". Each pair is intersected by the status pipeline's own rule
// (gatewayapi.HostnameIntersection), so status and translation cannot disagree.
func intersectHostnames(listener string, route []gatewayv1.Hostname) []string {
	var hosts []string
	for _, r := range route {
		h, ok := gatewayapi.HostnameIntersection(gatewayv1.Hostname(listener), r)
		host := string(h)
		if ok && !slices.Contains(hosts, host) {
			hosts = append(hosts, host)
		}
	}
	return hosts
}

func isWildcard(host string) bool { return strings.HasPrefix(host, "*") }

// consulServedHostnames is what Consul 1.15 serves of an http-route with hostnames
// entry on a listener with hostname listener: HTTPRouteConfigEntry.FilteredHostnames
// (Consul 1.15.4 agent/structs/config_entry_routes.go:307), called with APIGatewayListener.GetHostname.
func consulServedHostnames(entry []string, listener string) []string {
	if listener == "" {
		listener = "*"
	}
	if len(entry) == 0 {
		return []string{listener}
	}
	wildcard := strings.ContainsRune(listener, '*')
	suffix := strings.TrimPrefix(strings.TrimPrefix(listener, "*"), ".")
	var hosts []string
	for _, h := range entry {
		if (wildcard && strings.HasSuffix(h, suffix)) || (!wildcard && h == suffix) {
			hosts = append(hosts, h)
		}
	}
	return hosts
}
