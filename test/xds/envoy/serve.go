package envoy

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	httpinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/http_inspector/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// What a client sees when Envoy does not answer at the HTTP level.
var (
	// ErrConnectionRefused: nothing listens on the port.
	ErrConnectionRefused = errors.New("connection refused")
	// ErrConnectionReset: Envoy accepted the connection and closed it (no filter
	// chain matches, or TLS on one side only).
	ErrConnectionReset = errors.New("connection reset")
	// ErrNotModelled: the configuration uses something this model does not
	// reproduce; it refuses rather than guess.
	ErrNotModelled = errors.New("not modelled")
)

// connection is what Envoy knows of a downstream connection when it picks a filter
// chain.
type connection struct {
	port uint32
	// sni is the TLS server name; "" is a plaintext connection.
	sni string
}

func (c connection) tls() bool { return c.sni != "" }

// ServeTCP answers which cluster and endpoint a TCP connection to port (with TLS
// server name sni, "" for plaintext) reaches through a TCP proxy filter chain.
func ServeTCP(c *Config, port uint32, sni string, rnd *rand.Rand) (cluster, endpoint string, err error) {
	conn := connection{port: port, sni: sni}
	chain, err := c.chainFor(conn)
	if err != nil {
		return "", "", err
	}
	p, err := terminalTCPProxy(chain)
	if err != nil {
		return "", "", fmt.Errorf("port %d: %w", port, err)
	}
	cluster, err = pickTCPCluster(p, rnd)
	if err != nil {
		return "", "", fmt.Errorf("port %d: %w", port, err)
	}
	// The TCP proxy closes the connection when the cluster is unknown or has no
	// healthy host. (source/common/tcp_proxy/tcp_proxy.cc, Filter::initializeUpstreamConnection)
	if c.Clusters[cluster] == nil {
		return cluster, "", fmt.Errorf("%w: TCP proxy on port %d: cluster %q not found", ErrConnectionReset, port, cluster)
	}
	endpoint, ok, err := c.pickEndpoint(cluster, rnd)
	if err != nil {
		return cluster, "", err
	}
	if !ok {
		return cluster, "", fmt.Errorf("%w: TCP proxy on port %d: no healthy upstream in %q", ErrConnectionReset, port, cluster)
	}
	return cluster, endpoint, nil
}

// chainFor finds the listener a connection reaches and the filter chain it is handed
// to, and checks that both ends agree on TLS.
func (c *Config) chainFor(conn connection) (*listenerv3.FilterChain, error) {
	l, err := c.listenerOn(conn.port)
	if err != nil {
		return nil, err
	}
	chain, err := filterChain(l, conn)
	if err != nil {
		return nil, fmt.Errorf("listener %q: %w", l.GetName(), err)
	}
	if err := tlsAgrees(chain, conn); err != nil {
		return nil, fmt.Errorf("listener %q: %w", l.GetName(), err)
	}
	return chain, nil
}

// listenerOn is the TCP listener bound to port.
func (c *Config) listenerOn(port uint32) (*listenerv3.Listener, error) {
	var found []*listenerv3.Listener
	for _, name := range slices.Sorted(maps.Keys(c.Listeners)) {
		l := c.Listeners[name]
		a := l.GetAddress().GetSocketAddress()
		if a.GetProtocol() != corev3.SocketAddress_TCP || a.GetPortValue() != port {
			continue
		}
		if b := l.GetBindToPort(); b != nil && !b.GetValue() {
			continue
		}
		found = append(found, l)
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("%w: no listener on port %d", ErrConnectionRefused, port)
	case 1:
		return found[0], nil
	}
	return nil, fmt.Errorf("%w: %d listeners on port %d: which one a connection reaches depends on its destination address", ErrNotModelled, len(found), port)
}

// filterChain picks a listener's filter chain the way FilterChainManagerImpl does:
// criterion by criterion (destination port, destination IP, server name, transport
// protocol, application protocols), each time keeping the chains with the most
// specific value that matches and never going back; when none is left, the default
// filter chain. (source/server/filter_chain_manager_impl.cc, findFilterChain; the
// order is documented in api/envoy/config/listener/v3/listener_components.proto,
// FilterChainMatch.)
func filterChain(l *listenerv3.Listener, conn connection) (*listenerv3.FilterChain, error) {
	if l.GetFilterChainMatcher() != nil {
		return nil, fmt.Errorf("%w: filter_chain_matcher", ErrNotModelled)
	}
	seen, err := inspect(l, conn)
	if err != nil {
		return nil, err
	}
	candidates, err := narrow(l.GetFilterChains(), seen, l.GetAddress().GetSocketAddress().GetAddress())
	if err != nil {
		return nil, err
	}
	switch {
	case len(candidates) == 1:
		return candidates[0], nil
	case len(candidates) > 1:
		// validateFilterChainMatches makes Envoy refuse such a listener.
		return nil, fmt.Errorf("%d filter chains match, which Envoy would have refused", len(candidates))
	case l.GetDefaultFilterChain() != nil:
		return l.GetDefaultFilterChain(), nil
	}
	return nil, fmt.Errorf("%w: no filter chain matches port %d, server name %q", ErrConnectionReset, conn.port, conn.sni)
}

// seen is what the listener filters found out about a connection.
type seen struct {
	port      uint32
	sni       string
	transport string
	alpn      []string
}

// inspect runs the listener filters: the TLS inspector reports TLS, the server name
// and nothing of ALPN here (a client's ALPN list is not part of the request); the
// HTTP inspector reports HTTP/1.1 on plaintext. Without an inspector the transport
// is "raw_buffer" and the server name unknown. (source/server/active_tcp_socket.cc sets
// the raw_buffer default; docs: configuration/listeners/listener_filters.)
func inspect(l *listenerv3.Listener, conn connection) (seen, error) {
	s := seen{port: conn.port, transport: "raw_buffer"}
	for _, f := range l.GetListenerFilters() {
		tc := f.GetTypedConfig()
		switch {
		case tc.MessageIs(&tlsinspectorv3.TlsInspector{}):
			if conn.tls() {
				s.transport, s.sni = "tls", strings.ToLower(conn.sni)
			}
		case tc.MessageIs(&httpinspectorv3.HttpInspector{}):
			if !conn.tls() {
				s.alpn = []string{"http/1.1"}
			}
		default:
			return seen{}, fmt.Errorf("%w: listener filter %s", ErrNotModelled, f.GetName())
		}
	}
	return s, nil
}

// narrow applies the criteria in Envoy's order.
func narrow(chains []*listenerv3.FilterChain, s seen, listenerAddress string) ([]*listenerv3.FilterChain, error) {
	for _, chain := range chains {
		if err := modelledMatch(chain.GetFilterChainMatch(), s); err != nil {
			return nil, err
		}
	}
	dstIPs, err := addressPrefixes(chains, listenerAddress)
	if err != nil {
		return nil, err
	}
	steps := []struct {
		prefs []string
		keys  func(*listenerv3.FilterChainMatch) []string
	}{
		{[]string{fmt.Sprint(s.port), "0"}, func(m *listenerv3.FilterChainMatch) []string {
			return []string{fmt.Sprint(m.GetDestinationPort().GetValue())}
		}},
		{dstIPs, func(m *listenerv3.FilterChainMatch) []string { keys, _ := cidrs(m.GetPrefixRanges()); return keys }},
		{serverNamePrefs(s.sni), func(m *listenerv3.FilterChainMatch) []string {
			return orCatchAll(lowerTrimStar(m.GetServerNames()))
		}},
		{[]string{s.transport, ""}, func(m *listenerv3.FilterChainMatch) []string { return []string{m.GetTransportProtocol()} }},
		{append(slices.Clone(s.alpn), ""), func(m *listenerv3.FilterChainMatch) []string { return orCatchAll(m.GetApplicationProtocols()) }},
	}
	for _, step := range steps {
		chains = keepFirstPreferred(chains, step.prefs, step.keys)
	}
	return chains, nil
}

// keepFirstPreferred keeps the chains filed under the first preference any chain has.
func keepFirstPreferred(chains []*listenerv3.FilterChain, prefs []string, keys func(*listenerv3.FilterChainMatch) []string) []*listenerv3.FilterChain {
	for _, p := range prefs {
		var kept []*listenerv3.FilterChain
		for _, chain := range chains {
			if slices.Contains(keys(chain.GetFilterChainMatch()), p) {
				kept = append(kept, chain)
			}
		}
		if len(kept) > 0 {
			return kept
		}
	}
	return nil
}

// serverNamePrefs: the exact name, then each wildcard suffix from the longest
// (".b.example.com", ".example.com", ".com" for "a.b.example.com"), then chains
// without server names.
func serverNamePrefs(sni string) []string {
	prefs := []string{}
	if sni != "" {
		prefs = append(prefs, sni)
		for i := 1; i < len(sni)-1; i++ {
			if sni[i] == '.' {
				prefs = append(prefs, sni[i:])
			}
		}
	}
	return append(prefs, "")
}

func lowerTrimStar(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strings.TrimPrefix(strings.ToLower(n), "*")
	}
	return out
}

// addressPrefixes are the destination IP preferences: the listener's address under
// every prefix length from the longest, then chains without prefix ranges. A wildcard
// listener address leaves the connection's destination IP unknown.
func addressPrefixes(chains []*listenerv3.FilterChain, listenerAddress string) ([]string, error) {
	usesRanges := slices.ContainsFunc(chains, func(c *listenerv3.FilterChain) bool {
		return len(c.GetFilterChainMatch().GetPrefixRanges()) > 0
	})
	if !usesRanges {
		return []string{""}, nil
	}
	ip, err := netip.ParseAddr(listenerAddress)
	if err != nil || ip.IsUnspecified() {
		return nil, fmt.Errorf("%w: destination prefix ranges on a listener bound to %q", ErrNotModelled, listenerAddress)
	}
	var prefs []string
	for bits := ip.BitLen(); bits >= 0; bits-- {
		p, _ := ip.Prefix(bits)
		prefs = append(prefs, p.String())
	}
	return append(prefs, ""), nil
}

// modelledMatch refuses criteria about the client's address, which a request does
// not carry, and ALPN lists on TLS, which it does not either.
func modelledMatch(m *listenerv3.FilterChainMatch, s seen) error {
	switch {
	case len(m.GetDirectSourcePrefixRanges()) > 0, len(m.GetSourcePrefixRanges()) > 0, len(m.GetSourcePorts()) > 0,
		m.GetSourceType() != listenerv3.FilterChainMatch_ANY:
		return fmt.Errorf("%w: filter chain match on the client's address", ErrNotModelled)
	case len(m.GetApplicationProtocols()) > 0 && s.transport == "tls":
		return fmt.Errorf("%w: filter chain match on the TLS client's ALPN", ErrNotModelled)
	}
	return nil
}

// tlsAgrees: a TLS client on a plaintext chain, or a plaintext client on a TLS chain,
// fails the handshake or the HTTP parse and the connection is closed.
func tlsAgrees(chain *listenerv3.FilterChain, conn connection) error {
	ts := chain.GetTransportSocket()
	chainTLS := false
	switch {
	case ts == nil, ts.GetName() == "envoy.transport_sockets.raw_buffer", ts.GetName() == "raw_buffer":
	case ts.GetTypedConfig().MessageIs(&tlsv3.DownstreamTlsContext{}):
		chainTLS = true
	default:
		return fmt.Errorf("%w: transport socket %s", ErrNotModelled, ts.GetName())
	}
	switch {
	case chainTLS && !conn.tls():
		return fmt.Errorf("%w: plaintext connection to a TLS filter chain", ErrConnectionReset)
	case !chainTLS && conn.tls():
		return fmt.Errorf("%w: TLS connection (server name %q) to a plaintext filter chain", ErrConnectionReset, conn.sni)
	}
	return nil
}
