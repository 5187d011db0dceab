package dataplane

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// service exposes one port per distinct listener port; listeners sharing a port share
// the Service port (Consul's api-gateway serves them on one Envoy listener).
func service(in Gateway, name string, labels map[string]string, owner *metav1ac.OwnerReferenceApplyConfiguration, spec v1alpha1.GatewayConfigSpec, allowed gatewayapi.KeyAllowlist) *corev1ac.ServiceApplyConfiguration {
	gw := in.Gateway
	serviceType := corev1.ServiceTypeLoadBalancer
	if spec.Service != nil && spec.Service.Type != nil {
		serviceType = *spec.Service.Type
	}
	serviceSpec := corev1ac.ServiceSpec().
		WithType(serviceType).
		WithSelector(selectorLabels(gw))
	// A requested address (one IP; the status pipeline refuses anything else) is the
	// Service's own: its cluster IP, or what its load balancer is asked for.
	if len(gw.Spec.Addresses) == 1 {
		switch requested := gw.Spec.Addresses[0].Value; serviceType {
		case corev1.ServiceTypeClusterIP:
			serviceSpec.WithClusterIP(requested)
		case corev1.ServiceTypeLoadBalancer:
			serviceSpec.WithLoadBalancerIP(requested)
		}
	}
	for _, port := range listenerPorts(in) {
		serviceSpec.WithPorts(corev1ac.ServicePort().
			WithName(portName(port)).
			WithProtocol(corev1.ProtocolTCP).
			WithPort(port).
			WithTargetPort(intstr.FromInt32(port)))
	}
	svc := corev1ac.Service(name, gw.Namespace).
		WithLabels(labels).
		WithOwnerReferences(owner).
		WithSpec(serviceSpec)
	if annotations := serviceAnnotations(gw, spec, allowed); len(annotations) > 0 {
		svc.WithAnnotations(annotations)
	}
	return svc
}

// serviceAnnotations are the allowed infrastructure annotations and the Gateway's own
// annotations the GatewayConfig says to copy (only a class's may say so, see
// gatewayconfig.For).
func serviceAnnotations(gw *gatewayv1.Gateway, spec v1alpha1.GatewayConfigSpec, allowed gatewayapi.KeyAllowlist) map[string]string {
	out := infrastructureAnnotations(gw, allowed)
	if spec.Service == nil {
		return out
	}
	for _, key := range spec.Service.CopyAnnotations {
		if v, ok := gw.Annotations[key]; ok {
			out[key] = v
		}
	}
	return out
}

// listenerPorts are the distinct ports of the Gateway's listeners and of its
// ListenerSets' accepted listeners, ascending.
func listenerPorts(in Gateway) []gatewayv1.PortNumber {
	var ports []gatewayv1.PortNumber
	for _, l := range in.Gateway.Spec.Listeners {
		if !slices.Contains(ports, l.Port) {
			ports = append(ports, l.Port)
		}
	}
	for _, port := range in.ListenerSetPorts {
		if !slices.Contains(ports, port) {
			ports = append(ports, port)
		}
	}
	slices.Sort(ports)
	return ports
}

func portName(port gatewayv1.PortNumber) string { return fmt.Sprintf("port-%d", port) }
