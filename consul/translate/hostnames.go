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
// hostnames apply to every parent, filtered per Consul listener by Consul's own rule
// (consulServedHostnames). A parent is a Consul listener, which serves every Gateway
// listener on its port (its members): the route's hostnames through each member the
// route attaches to are worked out (intersectHostnames; a route without hostnames
// takes the member's hostname), and one list is looked for that makes Consul serve
// exactly those on every parent:
//
//   - the concrete plan: the union of what every member serves, when none of that is a
//     wildcard. Route hostnames that intersect no listener are left out: Consul's
//     suffix filter would otherwise serve "example.com" or "badexample.com" on a
//     "*.example.com" listener. This is how a listener's hostname reaches Consul when
//     its port is shared.
//   - the authority plan: no hostnames on Consul listeners without one (a port with
//     several wildcard listeners, or none): Consul serves the catch-all virtual host,
//     and every match of the entry is narrowed to the wildcards by a header match on
//     ":authority" (authorityMatch).
//   - the listener plan: no hostnames, so Consul serves each Consul listener's own
//     hostname. Right exactly for a member that serves its Consul listener's hostname
//     and nothing else, which is what a route wildcard that is as broad as the
//     listener's hostname or broader gives ("*.example.com" on a "*.example.com" or
//     "a.example.com" listener).
//
// A member neither plan serves exactly (a wildcard route hostname on a listener without
// hostname or with a broader wildcard, or hostnames that members need differently) is
// left out, with a message: the route is served more narrowly than its status says,
// never more broadly. The plan that keeps more members wins, the concrete plan on a tie.
func routeHostnames(route []gatewayv1.Hostname, parents []parentListener) ([]string, []string, []parentListener, []droppedParent) {
	served := make([][][]string, len(parents))
	for i, p := range parents {
		served[i] = make([][]string, len(p.members))
		for j, m := range p.members {
			served[i][j] = memberHostnames(m, route)
		}
	}
	hosts, keep := concretePlan(parents, served)
	if keepListener := listenerPlan(parents, served); countKept(keepListener) > countKept(keep) {
		hosts, keep = nil, keepListener
	}
	var authority []string
	if wildcards, keepAuthority := authorityPlan(parents, served); countKept(keepAuthority) > countKept(keep) {
		hosts, authority, keep = nil, wildcards, keepAuthority
	}
	var kept []parentListener
	var dropped []droppedParent
	for i, p := range parents {
		var members []memberListener
		for j, m := range p.members {
			if keep[i][j] {
				members = append(members, m)
				continue
			}
			dropped = append(dropped, droppedParent{p.problemParent(m), hostnameProblem(p, m, route, hosts, served[i][j])})
		}
		if len(members) > 0 {
			p.members = members
			kept = append(kept, p)
		}
	}
	return hosts, authority, kept, dropped
}

// memberHostnames are the hostnames Gateway API serves for a route with hostnames
// route through listener m: the listener's own ("*" for any) when the route has none.
// A concrete one that a more specific listener of the port has (its hostname, or a
// longer wildcard) is left out: its requests go to that listener, and on one Consul
// listener the route would share that hostname's virtual host with its routes.
func memberHostnames(m memberListener, route []gatewayv1.Hostname) []string {
	if len(route) == 0 {
		return []string{consulHostname(m.hostname)}
	}
	port := m.portHosts
	if len(port) == 0 {
		port = []string{m.hostname}
	}
	var out []string
	for _, h := range minimalHostnames(intersectHostnames(m.hostname, route)) {
		if isWildcard(h) || mostSpecificListener(port, h) == m.hostname {
			out = append(out, h)
		}
	}
	return out
}

// mostSpecificListener is the hostname, among listener hostnames hosts, of the
// listener Gateway API gives a request for the concrete host: the same hostname, else
// the longest wildcard matching it, else none ("").
func mostSpecificListener(hosts []string, host string) string {
	best := ""
	for _, h := range hosts {
		switch {
		case h == host:
			return h
		case gatewayapi.WildcardMatches(gatewayv1.Hostname(h), gatewayv1.Hostname(host)) && len(h) > len(best):
			best = h
		}
	}
	return best
}

// consulHostname is the hostname Consul gives a listener with hostname h
// (APIGatewayListener.GetHostname, Consul 1.15.4 agent/structs/config_entry_gateways.go:889).
func consulHostname(h string) string {
	if h == "" {
		return "*"
	}
	return h
}

// concretePlan returns the union of the hostnames the members serve and which members
// Consul then serves exactly. Members that need a wildcard are left out; a parent
// Consul would serve more or less than its kept members need loses them all, until the
// rest agree; dropping only shrinks the union, so that ends.
func concretePlan(parents []parentListener, served [][][]string) ([]string, [][]bool) {
	keep := make([][]bool, len(parents))
	for i := range parents {
		keep[i] = make([]bool, len(served[i]))
		for j, hosts := range served[i] {
			keep[i][j] = len(hosts) > 0 && !slices.ContainsFunc(hosts, isWildcard)
		}
	}
	for {
		var hosts []string
		for i := range parents {
			for _, h := range keptHostnames(served[i], keep[i]) {
				if !slices.Contains(hosts, h) {
					hosts = append(hosts, h)
				}
			}
		}
		changed := false
		for i, p := range parents {
			need := keptHostnames(served[i], keep[i])
			if len(need) > 0 && !sameSet(consulServedHostnames(hosts, p.hostname), need) {
				clear(keep[i])
				changed = true
			}
		}
		if !changed {
			return hosts, keep
		}
	}
}

// keptHostnames is the union of the hostnames of the kept members.
func keptHostnames(served [][]string, keep []bool) []string {
	var out []string
	for j, hosts := range served {
		for _, h := range hosts {
			if keep[j] && !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
	}
	return out
}

// listenerPlan returns which members an entry without hostnames serves exactly: those
// that serve their Consul listener's hostname and nothing else.
func listenerPlan(parents []parentListener, served [][][]string) [][]bool {
	keep := make([][]bool, len(parents))
	for i, p := range parents {
		keep[i] = make([]bool, len(served[i]))
		for j, hosts := range served[i] {
			keep[i][j] = len(hosts) == 1 && hosts[0] == consulHostname(p.hostname)
		}
	}
	return keep
}

func countKept(keep [][]bool) int {
	n := 0
	for _, k := range keep {
		n += countTrue(k)
	}
	return n
}

// hostnameProblem says why member m of parent p, which serves served, is left out when
// the entry has hostnames hosts.
func hostnameProblem(p parentListener, m memberListener, route []gatewayv1.Hostname, hosts, served []string) string {
	listener := fmt.Sprintf("listener %s/%s", p.gateway, m.name)
	listenerHost := "no hostname"
	if m.hostname != "" {
		listenerHost = fmt.Sprintf("hostname %q", m.hostname)
	}
	switch {
	case len(served) == 0 && len(intersectHostnames(m.hostname, route)) > 0:
		return fmt.Sprintf("%s: the route's hostnames there, %v, are those of more specific listeners of its port, which take their requests; the route is left out of it",
			listener, intersectHostnames(m.hostname, route))
	case len(served) == 0:
		return fmt.Sprintf("%s: its %s matches none of the route's hostnames; the route is left out of it", listener, listenerHost)
	case len(hosts) > 0 && len(served) == 1 && served[0] == consulHostname(p.hostname):
		return fmt.Sprintf("%s: the route's hostnames there are %v, which Consul serves only for an entry without hostnames, while its other listeners need the entry to name %v; one entry has one list of hostnames, so the route is left out of this listener",
			listener, served, hosts)
	case slices.ContainsFunc(served, isWildcard) && p.hostname != m.hostname:
		return fmt.Sprintf("%s: the route's hostnames there are %v; Consul 1.15 takes no wildcard hostnames on an http-route, and the listener shares its port with others whose hostnames the route's entry must name, "+
			"while Consul serves a wildcard only as the hostname of its one listener on the port (%s), so the route is left out of this listener", listener, served, describeConsulHostname(p.hostname))
	case slices.ContainsFunc(served, isWildcard):
		return fmt.Sprintf("%s: the route's hostnames there are %v; Consul 1.15 takes no wildcard hostnames on an http-route, and only a listener hostname equal to or narrower than the wildcard can stand in for it (this listener has %s), so the route is left out of this listener", listener, served, listenerHost)
	}
	return fmt.Sprintf("%s: the route's hostnames there are %v, but with the hostnames its other listeners need Consul 1.15 would serve %v (it matches route hostnames to a wildcard listener by suffix); the route is left out of this listener",
		listener, served, consulServedHostnames(hosts, p.hostname))
}

func describeConsulHostname(h string) string {
	if h == "" {
		return "no hostname"
	}
	return fmt.Sprintf("hostname %q", h)
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
