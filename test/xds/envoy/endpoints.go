package envoy

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
)

// The load balancer model: which host of a cluster a request or connection reaches.
// Envoy's own choice among eligible hosts depends on the policy (round robin, least
// request, ring hash...); here it is random by load_balancing_weight, so any host Envoy
// could pick may come out. Sources: source/common/upstream/load_balancer_impl.cc
// (LoadBalancerBase::isHostSetInPanic, recalculatePerPriorityState) and the docs
// intro/arch_overview/upstream/load_balancing/{panic_threshold,priority,degraded}.

const (
	// defaultPanicThreshold applies when common_lb_config sets none (cluster.proto).
	defaultPanicThreshold = 50.0
	// defaultOverprovisioning is ClusterLoadAssignment.Policy's default, 140%.
	defaultOverprovisioning = 140.0
)

// pickEndpoint returns "ip:port" of a host of cluster, or ok false when Envoy has no
// host to send to (its 503 "no healthy upstream").
func (c *Config) pickEndpoint(cluster string, rnd *rand.Rand) (string, bool, error) {
	cla, err := c.loadAssignment(cluster)
	if err != nil {
		return "", false, err
	}
	hosts, err := eligibleHosts(c.Clusters[cluster], cla, rnd)
	if err != nil || len(hosts) == 0 {
		return "", false, err
	}
	h := pickWeighted(hosts, func(e *endpointv3.LbEndpoint) uint64 { return uint64(max(e.GetLoadBalancingWeight().GetValue(), 1)) }, rnd)
	addr, err := endpointAddress(h)
	if err != nil {
		return "", false, fmt.Errorf("cluster %q: %w", cluster, err)
	}
	return addr, true, nil
}

// loadAssignment is where a cluster's hosts come from: EDS (under the cluster's
// service_name if it sets one) or the cluster's own load_assignment.
func (c *Config) loadAssignment(cluster string) (*endpointv3.ClusterLoadAssignment, error) {
	cl := c.Clusters[cluster]
	switch cl.GetType() {
	case clusterv3.Cluster_EDS:
		name := cl.GetEdsClusterConfig().GetServiceName()
		if name == "" {
			name = cluster
		}
		return c.Endpoints[name], nil
	case clusterv3.Cluster_STATIC, clusterv3.Cluster_STRICT_DNS, clusterv3.Cluster_LOGICAL_DNS:
		return cl.GetLoadAssignment(), nil
	}
	return nil, fmt.Errorf("%w: cluster %q of type %s", ErrNotModelled, cluster, cl.GetType())
}

// eligibleHosts are the hosts a pick is made among: the healthy ones (HEALTHY or
// UNKNOWN) of the first priority, or its degraded ones for the share of load the
// healthy ones cannot take; every host of the priority in panic mode, when fewer than
// the panic threshold are healthy or degraded. Load spilling over to a second priority
// is not modelled.
func eligibleHosts(cl *clusterv3.Cluster, cla *endpointv3.ClusterLoadAssignment, rnd *rand.Rand) ([]*endpointv3.LbEndpoint, error) {
	byPriority := map[uint32][]*endpointv3.LbEndpoint{}
	for _, l := range cla.GetEndpoints() {
		byPriority[l.GetPriority()] = append(byPriority[l.GetPriority()], l.GetLbEndpoints()...)
	}
	priorities := slices.Sorted(maps.Keys(byPriority))
	if len(priorities) == 0 {
		return nil, nil
	}
	all := byPriority[priorities[0]]
	healthy, degraded := byHealth(all)
	factor := defaultOverprovisioning
	if f := cla.GetPolicy().GetOverprovisioningFactor(); f != nil {
		factor = float64(f.GetValue())
	}
	healthyLoad, degradedLoad := loads(len(healthy), len(degraded), len(all), factor)
	if len(priorities) > 1 && healthyLoad+degradedLoad < 100 {
		return nil, fmt.Errorf("%w: cluster %q spills load over to priority %d", ErrNotModelled, cl.GetName(), priorities[1])
	}
	if inPanic(cl, len(healthy)+len(degraded), len(all), healthyLoad+degradedLoad) {
		return all, nil
	}
	if healthyLoad+degradedLoad == 0 {
		return nil, nil
	}
	if rnd.Float64()*(healthyLoad+degradedLoad) < healthyLoad {
		return healthy, nil
	}
	return degraded, nil
}

func byHealth(hosts []*endpointv3.LbEndpoint) (healthy, degraded []*endpointv3.LbEndpoint) {
	for _, h := range hosts {
		switch h.GetHealthStatus() {
		case corev3.HealthStatus_HEALTHY, corev3.HealthStatus_UNKNOWN:
			healthy = append(healthy, h)
		case corev3.HealthStatus_DEGRADED:
			degraded = append(degraded, h)
		}
	}
	return healthy, degraded
}

// loads are the shares (in %) of the priority's load its healthy and degraded hosts
// take: each set's share of hosts times the overprovisioning factor, healthy first,
// capped at 100 together.
func loads(healthy, degraded, total int, factor float64) (float64, float64) {
	if total == 0 {
		return 0, 0
	}
	h := min(100, float64(healthy)*factor/float64(total))
	d := min(100-h, float64(degraded)*factor/float64(total))
	return h, d
}

// inPanic: a priority whose healthy and degraded hosts are fewer than the panic
// threshold (in % of its hosts) balances over all its hosts, unless it can still take
// all the load. A threshold of 0 disables panic mode.
func inPanic(cl *clusterv3.Cluster, available, total int, load float64) bool {
	threshold := defaultPanicThreshold
	if t := cl.GetCommonLbConfig().GetHealthyPanicThreshold(); t != nil {
		threshold = t.GetValue()
	}
	if load >= 100 {
		return false
	}
	percent := 0.0
	if total > 0 {
		percent = 100 * float64(available) / float64(total)
	}
	return percent < threshold
}

func endpointAddress(h *endpointv3.LbEndpoint) (string, error) {
	a := h.GetEndpoint().GetAddress().GetSocketAddress()
	if a == nil {
		return "", fmt.Errorf("%w: endpoint without a socket address", ErrNotModelled)
	}
	return net.JoinHostPort(a.GetAddress(), strconv.FormatUint(uint64(a.GetPortValue()), 10)), nil
}

// pickWeighted picks one item with probability weight/total, the way Envoy picks a
// weighted cluster: a random value below the total, then the item whose running sum
// first exceeds it. (config_impl.cc, RouteEntryImplBase::pickWeightedCluster)
func pickWeighted[T any](items []T, weight func(T) uint64, rnd *rand.Rand) T {
	var total uint64
	for _, it := range items {
		total += weight(it)
	}
	var zero T
	if total == 0 {
		return zero
	}
	selected := rnd.Uint64N(total)
	var end uint64
	for _, it := range items {
		end += weight(it)
		if selected < end {
			return it
		}
	}
	return zero
}
