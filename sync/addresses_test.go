package sync

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
)

func TestRequestedAddressProblem(t *testing.T) {
	ip := func(v string) gatewayv1.GatewaySpecAddress { return gatewayv1.GatewaySpecAddress{Value: v} }
	typed := func(kind gatewayv1.AddressType, v string) gatewayv1.GatewaySpecAddress {
		return gatewayv1.GatewaySpecAddress{Type: &kind, Value: v}
	}
	withService := func(serviceType corev1.ServiceType) *v1alpha1.GatewayConfig {
		return &v1alpha1.GatewayConfig{Spec: v1alpha1.GatewayConfigSpec{Service: &v1alpha1.ServiceConfig{Type: &serviceType}}}
	}
	for _, tt := range []struct {
		name      string
		addresses []gatewayv1.GatewaySpecAddress
		deploying bool
		config    *v1alpha1.GatewayConfig
		want      string // a substring of the problem; "" for none
	}{
		{"none", nil, false, nil, ""},
		{"one IP, LoadBalancer by default", []gatewayv1.GatewaySpecAddress{ip("203.0.113.9")}, true, nil, ""},
		{"one typed IP, ClusterIP", []gatewayv1.GatewaySpecAddress{typed(gatewayv1.IPAddressType, "10.96.0.50")}, true, withService(corev1.ServiceTypeClusterIP), ""},
		{"not deploying", []gatewayv1.GatewaySpecAddress{ip("203.0.113.9")}, false, nil, "--deploy-gateways=false"},
		{"two", []gatewayv1.GatewaySpecAddress{ip("203.0.113.9"), ip("203.0.113.10")}, true, nil, "has 2 addresses"},
		{"hostname", []gatewayv1.GatewaySpecAddress{typed(gatewayv1.HostnameAddressType, "gw.example.com")}, true, nil, "type Hostname is not supported"},
		{"not an IP", []gatewayv1.GatewaySpecAddress{ip("gw.example.com")}, true, nil, `"gw.example.com" is not an IP address`},
		{"NodePort", []gatewayv1.GatewaySpecAddress{ip("203.0.113.9")}, true, withService(corev1.ServiceTypeNodePort), "NodePort"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := requestedAddressProblem(tt.addresses, tt.deploying, tt.config)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("problem %q, want one containing %q", got, tt.want)
			}
		})
	}
}
