package dataplane

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/pods"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
)

// State implements contract.GatewayDeployments from the owned caches: the Gateway's
// addresses from its Service, how many of its pods are Ready and, when none is, what
// they report; and why nothing can be written for it, if so (unfit, writeProblem).
func (c *Controller) State(gw *gatewayv1.Gateway) contract.DeploymentState {
	key := cache.MetaObjectToName(gw)
	state := c.writeProblem(key)
	if why := unfit(gw, c.cfg.Defaults.InfrastructureKeys); why != "" {
		state.Invalid = why
	}
	gatewayPods, err := c.cfg.Owned.Pods.Lister().Pods(gw.Namespace).List(PodSelector(key))
	if err != nil {
		return state
	}
	var ready, own []*corev1.Pod
	for _, pod := range gatewayPods {
		if pods.Ready(pod) {
			ready = append(ready, pod)
		}
		// Only the Gateway's own pods speak in its status, not any pod labelled
		// like them.
		if OwnsPod(gw, pod) {
			own = append(own, pod)
		}
	}
	state.ReadyPods = len(ready)
	if len(ready) == 0 {
		state.PodProblem = firstPodProblem(own)
	}
	svc, err := c.cfg.Owned.Services.Lister().Services(gw.Namespace).Get(Name(gw))
	if err == nil && metav1.IsControlledBy(svc, gw) {
		state.Addresses = gatewayAddresses(svc, ready)
	}
	return state
}

// HasSynced reports whether every owned cache has synced.
func (c *Controller) HasSynced() bool {
	for _, synced := range c.cfg.Owned.HasSynced() {
		if !synced() {
			return false
		}
	}
	return true
}

// gatewayAddresses are a Gateway's addresses, by its Service's type: a LoadBalancer's
// ingress IPs and hostnames, a ClusterIP Service's cluster IPs, and for a NodePort
// Service the IPs of the nodes its Ready pods run on. Each appears once, IPs before
// hostnames, in order.
func gatewayAddresses(svc *corev1.Service, readyPods []*corev1.Pod) []gatewayv1.GatewayStatusAddress {
	var ips, hostnames []string
	switch svc.Spec.Type {
	case corev1.ServiceTypeLoadBalancer:
		for _, ingress := range svc.Status.LoadBalancer.Ingress {
			if ingress.IP != "" {
				ips = append(ips, ingress.IP)
			}
			if ingress.Hostname != "" {
				hostnames = append(hostnames, ingress.Hostname)
			}
		}
	case corev1.ServiceTypeNodePort:
		for _, pod := range readyPods {
			if pod.Status.HostIP != "" {
				ips = append(ips, pod.Status.HostIP)
			}
		}
	default:
		for _, ip := range svc.Spec.ClusterIPs {
			if ip != "" && ip != corev1.ClusterIPNone {
				ips = append(ips, ip)
			}
		}
	}
	var out []gatewayv1.GatewayStatusAddress
	for _, group := range []struct {
		values []string
		kind   gatewayv1.AddressType
	}{{ips, gatewayv1.IPAddressType}, {hostnames, gatewayv1.HostnameAddressType}} {
		slices.Sort(group.values)
		for _, v := range slices.Compact(group.values) {
			out = append(out, gatewayv1.GatewayStatusAddress{Type: new(group.kind), Value: v})
		}
	}
	return out
}
