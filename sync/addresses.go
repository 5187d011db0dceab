package sync

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
)

// requestedAddressProblem says why a Gateway's spec.addresses cannot be honoured, ""
// when it can. One IP address can: it becomes the gateway Service's cluster IP, or its
// load balancer IP for a LoadBalancer Service. A NodePort Service's addresses are its
// nodes', which no Gateway can choose; hostnames and named addresses have no place in a
// Service either. Without gateway deployments (deploying false) nothing can be asked of
// the Service at all.
func requestedAddressProblem(addresses []gatewayv1.GatewaySpecAddress, deploying bool, config *v1alpha1.GatewayConfig) string {
	switch {
	case len(addresses) == 0:
		return ""
	case !deploying:
		return "spec.addresses is not supported: this controller does not deploy the gateway pods (--deploy-gateways=false)"
	case len(addresses) > 1:
		return fmt.Sprintf("spec.addresses has %d addresses; the gateway's Service takes one", len(addresses))
	}
	a := addresses[0]
	if a.Type != nil && *a.Type != gatewayv1.IPAddressType {
		return fmt.Sprintf("spec.addresses: type %s is not supported; only IPAddress is", *a.Type)
	}
	if _, err := netip.ParseAddr(a.Value); err != nil {
		return fmt.Sprintf("spec.addresses: %q is not an IP address", a.Value)
	}
	if serviceType(config) == corev1.ServiceTypeNodePort {
		return "spec.addresses: a NodePort Service's addresses are its nodes' IPs, which cannot be requested"
	}
	return ""
}

// serviceType is the type of a Gateway's Service under config.
func serviceType(config *v1alpha1.GatewayConfig) corev1.ServiceType {
	if config == nil || config.Spec.Service == nil || config.Spec.Service.Type == nil {
		return corev1.ServiceTypeLoadBalancer
	}
	return *config.Spec.Service.Type
}

// unassignedAddresses lists the requested addresses the Gateway does not have yet.
func unassignedAddresses(requested []gatewayv1.GatewaySpecAddress, have []gatewayv1.GatewayStatusAddress) []string {
	var missing []string
	for _, r := range requested {
		found := false
		for _, a := range have {
			found = found || a.Value == r.Value
		}
		if !found {
			missing = append(missing, r.Value)
		}
	}
	return missing
}
