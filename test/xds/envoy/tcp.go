package envoy

import (
	"fmt"
	"math/rand/v2"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
)

// terminalTCPProxy is the chain's TCP proxy, its only network filter.
func terminalTCPProxy(chain *listenerv3.FilterChain) (*tcpproxyv3.TcpProxy, error) {
	filters := chain.GetFilters()
	if len(filters) != 1 {
		return nil, fmt.Errorf("%w: filter chain with %d network filters", ErrNotModelled, len(filters))
	}
	p, err := tcpProxy(filters[0])
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fmt.Errorf("filter chain's network filter %s is not a TCP proxy", filters[0].GetName())
	}
	if p.GetTunnelingConfig() != nil || p.GetOnDemand() != nil {
		return nil, fmt.Errorf("%w: TCP proxy tunneling or on-demand clusters", ErrNotModelled)
	}
	return p, nil
}

// pickTCPCluster is the TCP proxy's cluster, or one of its weighted clusters by weight.
func pickTCPCluster(p *tcpproxyv3.TcpProxy, rnd *rand.Rand) (string, error) {
	if p.GetCluster() != "" {
		return p.GetCluster(), nil
	}
	clusters := p.GetWeightedClusters().GetClusters()
	if len(clusters) == 0 {
		return "", fmt.Errorf("%w: TCP proxy without a cluster", ErrNotModelled)
	}
	c := pickWeighted(clusters, func(c *tcpproxyv3.TcpProxy_WeightedCluster_ClusterWeight) uint64 { return uint64(c.GetWeight()) }, rnd)
	if c == nil {
		return "", fmt.Errorf("TCP proxy weighted clusters weigh nothing")
	}
	return c.GetName(), nil
}
