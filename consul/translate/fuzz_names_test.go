package translate

import (
	"fmt"
	"slices"
	"testing"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/apimachinery/pkg/util/validation"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/fuzzgen"
)

// FuzzRouteHostnames decides the hostnames of an http-route entry for route hostnames
// and parent listeners built from the fuzzer's input, and checks: no wildcard reaches
// the entry (Consul 1.15 refuses it); every parent is kept or named in a problem; and
// on each kept parent Consul serves only hostnames Gateway API grants there
// (hostnameGranted, written independently) and all of them; and the order of the
// hostnames and parents does not matter.
func FuzzRouteHostnames(f *testing.F) {
	for _, s := range fuzzRouteHostnamesSeeds() {
		f.Add(s.data, s.host)
	}
	f.Fuzz(func(t *testing.T, data []byte, host string) {
		in := fuzzgen.New(data, host, "")
		route := in.RouteHostnames()
		parents := fuzzParents(in)
		hosts, authority, kept, dropped := routeHostnames(route, parents)
		if slices.ContainsFunc(hosts, isWildcard) {
			t.Errorf("wildcard in the entry's hostnames %v", hosts)
		}
		if members(kept)+len(dropped) != members(parents) {
			t.Errorf("%d listeners, %d kept, %d problems %v", members(parents), members(kept), len(dropped), dropped)
		}
		for _, p := range kept {
			served := consulServedHostnames(hosts, p.hostname)
			if authority != nil {
				served = authority // the catch-all virtual host, narrowed to them
			}
			var want []string
			for _, m := range p.members {
				for _, h := range memberHostnames(m, route) {
					if !slices.Contains(want, h) {
						want = append(want, h)
					}
				}
			}
			for _, h := range served {
				if !slices.ContainsFunc(p.members, func(m memberListener) bool { return hostnameGranted(m.hostname, route, h) }) {
					t.Errorf("Consul listener %s (hostname %q): Consul serves %q of %v, which none of its kept listeners %v grants to route hostnames %v", p.ref.SectionName, p.hostname, h, hosts, p.members, route)
				}
			}
			if !sameSet(want, served) {
				t.Errorf("Consul listener %s (hostname %q): Consul serves %v, Gateway API %v through %v", p.ref.SectionName, p.hostname, served, want, p.members)
			}
		}
		checkHostnamesOrderFree(t, route, parents, hosts, kept)
	})
}

// checkHostnamesOrderFree: route hostnames are a set, and parents are judged each on
// its own, so the same hostnames and parents in reverse order keep the same parents
// with the same hostnames.
func checkHostnamesOrderFree(t *testing.T, route []gatewayv1.Hostname, parents []parentListener, hosts []string, kept []parentListener) {
	t.Helper()
	sections := func(ps []parentListener) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = p.ref.SectionName
		}
		return out
	}
	reversedRoute, reversedParents := slices.Clone(route), slices.Clone(parents)
	slices.Reverse(reversedRoute)
	slices.Reverse(reversedParents)
	otherHosts, _, otherKept, _ := routeHostnames(reversedRoute, reversedParents)
	if !sameSet(hosts, otherHosts) || !sameSet(sections(kept), sections(otherKept)) {
		t.Errorf("route hostnames %v on parents %v: hostnames %v on %v, but in reverse order %v on %v",
			route, parents, hosts, sections(kept), otherHosts, sections(otherKept))
	}
}

// fuzzParents are one to four Consul listeners of one Gateway, each serving one to
// three Gateway listeners with or without hostname, as the status pipeline merges them
// (sync's mergePort) and the translation names their hostname (mergedHostname).
func fuzzParents(in *fuzzgen.Input) []parentListener {
	parents := make([]parentListener, 1+in.Intn(4))
	for i := range parents {
		parents[i] = parentListener{
			gateway: fuzzGateway,
			ref:     consulapi.ResourceReference{Kind: consulapi.APIGateway, Name: "gw.infra", SectionName: fmt.Sprintf("l%d", i)},
		}
		var hosts []string
		for j := range 1 + in.Intn(3) {
			host := ""
			if in.Intn(3) > 0 {
				host = string(in.Hostname())
			}
			if j > 0 && !mergeable(hosts, host) {
				continue
			}
			hosts = append(hosts, host)
			parents[i].members = append(parents[i].members, memberListener{name: gatewayv1.SectionName(fmt.Sprintf("l%d-%d", i, j)), hostname: host})
		}
		for j := range parents[i].members {
			parents[i].members[j].portHosts = hosts
		}
		parents[i].hostname = fuzzConsulHostname(hosts)
	}
	return parents
}

// mergeable reports whether a listener with hostname host joins listeners with hosts
// on one port, by the status pipeline's rule: distinct hostnames, no listener without
// hostname beside a wildcard, no wildcard within another.
func mergeable(hosts []string, host string) bool {
	if slices.Contains(hosts, host) {
		return false
	}
	if !isWideHost(host) {
		return true
	}
	return !slices.ContainsFunc(hosts, func(h string) bool {
		return isWideHost(h) && (h == "" || host == "" || nestedWildcards(h, host))
	})
}

// fuzzConsulHostname is the hostname of the Consul listener of hosts, as
// mergedHostname decides it.
func fuzzConsulHostname(hosts []string) string {
	listeners := make([]consulapi.APIGatewayListener, len(hosts))
	for i, h := range hosts {
		listeners[i] = consulapi.APIGatewayListener{Protocol: "http", Hostname: h}
	}
	return mergedHostname(listeners)
}

func isWideHost(h string) bool { return h == "" || isWildcard(h) }

func members(ps []parentListener) int {
	n := 0
	for _, p := range ps {
		n += len(p.members)
	}
	return n
}

// FuzzEntryNames checks the naming of entries for two Kubernetes objects of valid
// namespace and name, under any prefix: distinct objects get distinct entry names and
// distinct certificate names, SplitEntryName leads back to the object, an object's
// certificate and entry names differ, and no Service is named like the blackhole.
func FuzzEntryNames(f *testing.F) {
	for _, s := range fuzzEntryNamesSeeds() {
		f.Add(s.prefix, s.ns1, s.name1, s.ns2, s.name2)
	}
	f.Fuzz(func(t *testing.T, prefix, ns1, name1, ns2, name2 string) {
		if !validObject(ns1, name1) || !validObject(ns2, name2) {
			t.Skip("not a valid Kubernetes namespace and name")
		}
		n := Naming{Prefix: prefix}
		for _, o := range []kubeObject{{ns1, name1}, {ns2, name2}} {
			checkNamesOfObject(t, n, o)
		}
		if ns1 == ns2 && name1 == name2 {
			return
		}
		if n.EntryName(ns1, name1) == n.EntryName(ns2, name2) {
			t.Errorf("%s/%s and %s/%s share the entry name %q", ns1, name1, ns2, name2, n.EntryName(ns1, name1))
		}
		if n.CertificateName(ns1, name1) == n.CertificateName(ns2, name2) {
			t.Errorf("Secrets %s/%s and %s/%s share the certificate name %q", ns1, name1, ns2, name2, n.CertificateName(ns1, name1))
		}
	})
}

func validObject(namespace, name string) bool {
	return len(validation.IsDNS1123Label(namespace)) == 0 && len(validation.IsDNS1123Subdomain(name)) == 0
}

func checkNamesOfObject(t *testing.T, n Naming, o kubeObject) {
	t.Helper()
	entry := n.EntryName(o.namespace, o.name)
	if ns, name, ok := n.SplitEntryName(entry); !ok || ns != o.namespace || name != o.name {
		t.Errorf("prefix %q: SplitEntryName(%q) = (%q, %q, %v), want %v", n.Prefix, entry, ns, name, ok, o)
	}
	if n.CertificateName(o.namespace, o.name) == entry {
		t.Errorf("prefix %q: %v has the certificate and entry name %q", n.Prefix, o, entry)
	}
	if len(validation.IsDNS1035Label(o.name)) == 0 && n.ServiceName(o.name) == n.BlackholeService() {
		t.Errorf("prefix %q: Service %v is named like the blackhole", n.Prefix, o)
	}
}
