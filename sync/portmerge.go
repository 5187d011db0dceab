package sync

import (
	"crypto/x509"
	"fmt"
	"slices"
	"strings"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// mergePort decides which of the listeners idx (one port, one protocol, no conflict)
// Consul serves, and names the Consul listener they become. Consul's api-gateway has
// one listener per port (Consul 1.15.4 agent/structs/config_entry_gateways.go:802-811
// refuses two on a port with different hostnames, and its xDS keys listeners by port
// and protocol), so the Gateway listeners on a port are one Consul listener, and each
// one's hostname reaches Consul in the hostnames of the routes attached to it: Envoy
// then picks the virtual host by exact hostname, then longest wildcard suffix, which is
// the Gateway API's listener precedence. What one Consul listener cannot serve gets
// PortUnavailable, the later listener losing (portMergeProblem).
//
// Listeners whose references resolve are placed first, so that an invalid listener
// listed first does not keep a valid one off the port.
func mergePort(states []listenerState, idx []int, port gatewayv1.PortNumber) {
	order := slices.Clone(idx)
	slices.SortStableFunc(order, func(a, b int) int {
		return boolRank(states[b].servesRefs()) - boolRank(states[a].servesRefs())
	})
	var kept []*listenerState
	for _, i := range order {
		st := &states[i]
		if problem := portMergeProblem(kept, st, port); problem != "" {
			st.accepted, st.acceptedReason, st.acceptedMessage = false, gatewayv1.ListenerReasonPortUnavailable, problem
			continue
		}
		kept = append(kept, st)
	}
	for _, st := range kept {
		st.consulListener = kept[0].entryName
	}
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// portMergeProblem says why st cannot join the listeners kept on port, "" when it can.
//
//   - Hostnames: Consul's http-route takes no wildcard hostname (Consul 1.15.4
//     agent/structs/config_entry_routes.go:135), so the translation serves a port's
//     wildcards by the Consul listener's hostname, or by a header match on :authority
//     in the catch-all virtual host (consul/translate authorityMatch). That cannot
//     leave a wildcard's hosts out of a hostname-less listener's routes, nor keep a
//     host from matching two nested wildcards: those pairs are refused.
//   - Certificates: Consul serves the certificates of one listener by SNI
//     (sniProblem).
func portMergeProblem(kept []*listenerState, st *listenerState, port gatewayv1.PortNumber) string {
	if st.listener.Protocol == gatewayv1.TCPProtocolType || len(kept) == 0 {
		return ""
	}
	host := string(hostnameOf(st.listener))
	if !isWideHostname(host) {
		return sniProblem(kept, st, port)
	}
	for _, k := range kept {
		other := string(hostnameOf(k.listener))
		switch {
		case !isWideHostname(other):
			continue
		case host == "" || other == "":
			return fmt.Sprintf("listener %s has %s on port %d: a listener without hostname and a wildcard one cannot share a port in Consul 1.15, whose catch-all virtual host would need to leave the wildcard's hosts out",
				k.listener.Name, describeHostname(other), port)
		case nestedWildcardHostnames(host, other):
			return fmt.Sprintf("listener %s has hostname %q on port %d, within or around %q: Consul 1.15 serves a second wildcard of a port by a header match, and a host of both would reach the routes of both",
				k.listener.Name, other, port, host)
		}
	}
	return sniProblem(kept, st, port)
}

// nestedWildcardHostnames reports whether one of two wildcards matches hosts of the
// other.
func nestedWildcardHostnames(a, b string) bool {
	sa, sb := strings.TrimPrefix(a, "*"), strings.TrimPrefix(b, "*")
	return strings.HasSuffix(sa, sb) || strings.HasSuffix(sb, sa)
}

// isWideHostname reports whether a listener hostname stands for more than one host:
// a wildcard, or none.
func isWideHostname(h string) bool { return h == "" || strings.HasPrefix(h, "*") }

func describeHostname(h string) string {
	if h == "" {
		return "no hostname"
	}
	return fmt.Sprintf("hostname %q", h)
}

// certificateHosts are the names Consul matches a certificate to by SNI, in its order
// and with its repeats: the common name (even empty), the DNS names, the IP addresses.
func certificateHosts(leaf *x509.Certificate) []string {
	if leaf == nil {
		return nil
	}
	hosts := append([]string{leaf.Subject.CommonName}, leaf.DNSNames...)
	for _, ip := range leaf.IPAddresses {
		hosts = append(hosts, ip.String())
	}
	return hosts
}

// sniProblem says why st's certificates cannot be served on one Consul listener with
// those of kept, "" when they can. Listeners naming the same certificates need no SNI.
// Otherwise Consul 1.15.4 (agent/xds/listeners_ingress.go, makeInlineOverrideFilterChains)
// gives each certificate a filter chain matching the SNI names of its hosts, leaves out
// a host that is named twice (in two certificates, or twice in one), and answers any
// other name with the gateway's own Consul leaf certificate. The listener a TLS client
// reaches must get one of its own certificates: that is checked for one name of each
// kind of name (sniProbes), with Envoy's choice of filter chain (exact server name,
// then the longest wildcard) against the Gateway API's choice of listener.
func sniProblem(kept []*listenerState, st *listenerState, port gatewayv1.PortNumber) string {
	if st.listener.Protocol != gatewayv1.HTTPSProtocolType || !st.servesRefs() {
		return ""
	}
	group := []*listenerState{st}
	for _, k := range kept {
		if k.servesRefs() {
			group = append(group, k)
		}
	}
	if slices.IndexFunc(group, func(k *listenerState) bool { return !sameSecrets(k.certs, st.certs) }) < 0 {
		return ""
	}
	chains := sniChains(group)
	for _, name := range sniProbes(group) {
		owner := sniListener(group, name)
		if owner == nil {
			continue
		}
		served := chains.serve(name)
		if slices.ContainsFunc(owner.certs, func(c listenerCert) bool { return c.secret == served }) {
			continue
		}
		got := "the gateway's Consul leaf certificate (no certificate names it once)"
		if served != "" {
			got = "the certificate of Secret " + served
		}
		return fmt.Sprintf("the HTTPS listeners on port %d name different certificates, which one Consul listener serves by SNI from the names in the certificates: "+
			"a client asking for %s reaches listener %s, but Consul would answer it with %s", port, describeProbe(name), owner.listener.Name, got)
	}
	return ""
}

// describeProbe names an SNI probe for a message.
func describeProbe(name string) string {
	if name == sniProbe+".invalid" {
		return "a name no hostname or certificate names"
	}
	if rest, ok := strings.CutPrefix(name, sniProbe+"."); ok {
		return fmt.Sprintf("a name under %q", "*."+rest)
	}
	return fmt.Sprintf("%q", name)
}

func sameSecrets(a, b []listenerCert) bool {
	names := func(cs []listenerCert) []string {
		out := make([]string, 0, len(cs))
		for _, c := range cs {
			out = append(out, c.secret)
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return slices.Equal(names(a), names(b))
}

// sniTable is Envoy's filter chains of a Consul listener with several certificates:
// server names to the Secret whose certificate answers them.
type sniTable struct {
	names map[string]string
	only  string // the certificate answering every name when there is just one
}

func sniChains(group []*listenerState) sniTable {
	var certs []listenerCert
	for _, l := range group {
		for _, c := range l.certs {
			if !slices.ContainsFunc(certs, func(o listenerCert) bool { return o.secret == c.secret }) {
				certs = append(certs, c)
			}
		}
	}
	if len(certs) == 1 {
		return sniTable{only: certs[0].secret}
	}
	count := map[string]int{}
	for _, c := range certs {
		for _, h := range c.hosts {
			count[h]++
		}
	}
	table := sniTable{names: map[string]string{}}
	for _, c := range certs {
		for _, h := range c.hosts {
			if count[h] == 1 {
				table.names[h] = c.secret
			}
		}
	}
	return table
}

// serve returns the Secret whose certificate Envoy answers an SNI name with, "" for
// the Consul leaf certificate: an exact server name first, then the longest wildcard.
func (t sniTable) serve(name string) string {
	if t.only != "" {
		return t.only
	}
	if s, ok := t.names[name]; ok {
		return s
	}
	labels := strings.Split(name, ".")
	for i := 1; i < len(labels); i++ {
		if s, ok := t.names["*."+strings.Join(labels[i:], ".")]; ok {
			return s
		}
	}
	return ""
}

// sniProbe is the label put in front of a wildcard's suffix to probe it.
const sniProbe = "sni-probe"

// sniProbes are names that reach every combination of listener and filter chain: a
// name matches exactly one hostname or certificate name at most, and the wildcards it
// matches are all suffixes of the longest one, so each concrete name, one name under
// each wildcard, and one name nothing names stand for all.
func sniProbes(group []*listenerState) []string {
	var patterns []string
	for _, l := range group {
		patterns = append(patterns, string(hostnameOf(l.listener)))
		for _, c := range l.certs {
			patterns = append(patterns, c.hosts...)
		}
	}
	probes := []string{sniProbe + ".invalid"}
	for _, p := range patterns {
		switch {
		case p == "":
			continue
		case strings.HasPrefix(p, "*."):
			p = sniProbe + strings.TrimPrefix(p, "*")
		}
		if !slices.Contains(probes, p) {
			probes = append(probes, p)
		}
	}
	return probes
}

// sniListener is the listener of group Gateway API gives a request for name: the
// exact hostname, the longest wildcard, else one without hostname; nil for none.
func sniListener(group []*listenerState, name string) *listenerState {
	var best *listenerState
	bestLen := -1
	for _, l := range group {
		h := string(hostnameOf(l.listener))
		switch {
		case h == name:
			return l
		case h == "" && bestLen < 0:
			best, bestLen = l, 0
		case gatewayapi.WildcardMatches(gatewayv1.Hostname(h), gatewayv1.Hostname(name)) && len(h) > bestLen:
			best, bestLen = l, len(h)
		}
	}
	return best
}
