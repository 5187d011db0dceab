package envoy

import (
	"fmt"
	"net/netip"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
)

// Reading listeners: their chains, the filters Consul puts in them, match criteria.

// allChains are a listener's filter chains and its default filter chain, if any.
func allChains(l *listenerv3.Listener) []*listenerv3.FilterChain {
	chains := l.GetFilterChains()
	if d := l.GetDefaultFilterChain(); d != nil {
		chains = append(chains[:len(chains):len(chains)], d)
	}
	return chains
}

// connectionManager decodes a network filter if it is an HTTP connection manager.
func connectionManager(f *listenerv3.Filter) (*hcmv3.HttpConnectionManager, bool, error) {
	tc := f.GetTypedConfig()
	if tc == nil || !tc.MessageIs(&hcmv3.HttpConnectionManager{}) {
		return nil, false, nil
	}
	h := &hcmv3.HttpConnectionManager{}
	if err := tc.UnmarshalTo(h); err != nil {
		return nil, false, fmt.Errorf("filter %s: http connection manager: %w", f.GetName(), err)
	}
	return h, true, nil
}

// tcpProxy decodes a network filter if it is a TCP proxy; nil if it is not.
func tcpProxy(f *listenerv3.Filter) (*tcpproxyv3.TcpProxy, error) {
	tc := f.GetTypedConfig()
	if tc == nil || !tc.MessageIs(&tcpproxyv3.TcpProxy{}) {
		return nil, nil
	}
	p := &tcpproxyv3.TcpProxy{}
	if err := tc.UnmarshalTo(p); err != nil {
		return nil, fmt.Errorf("filter %s: tcp proxy: %w", f.GetName(), err)
	}
	return p, nil
}

func orCatchAll(values []string) []string {
	if len(values) == 0 {
		return []string{""}
	}
	return values
}

// cidrs normalises CIDR ranges as Envoy's CidrRange does (host bits cleared).
func cidrs(ranges []*corev3.CidrRange) ([]string, error) {
	out := make([]string, 0, len(ranges))
	for _, r := range ranges {
		addr, err := netip.ParseAddr(r.GetAddressPrefix())
		if err != nil {
			return nil, fmt.Errorf("invalid CIDR range %s: %w", r.GetAddressPrefix(), err)
		}
		p, err := addr.Prefix(int(r.GetPrefixLen().GetValue()))
		if err != nil {
			return nil, fmt.Errorf("invalid CIDR range %s/%d: %w", r.GetAddressPrefix(), r.GetPrefixLen().GetValue(), err)
		}
		out = append(out, p.String())
	}
	return orCatchAll(out), nil
}
