package v1alpha1

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		spec GatewayConfigSpec
		want []string // substrings, one per expected problem
	}{
		{"empty", GatewayConfigSpec{}, nil},
		{"replicas in order", GatewayConfigSpec{Replicas: &Replicas{Default: new(int32(2)), Min: new(int32(1)), Max: new(int32(3))}}, nil},
		{"min above max", GatewayConfigSpec{Replicas: &Replicas{Min: new(int32(4)), Max: new(int32(3))}}, []string{"spec.replicas.min 4 exceeds max 3"}},
		{"default outside", GatewayConfigSpec{Replicas: &Replicas{Default: new(int32(0)), Min: new(int32(1))}}, []string{"spec.replicas.default 0 is below min 1"}},
		{"negative", GatewayConfigSpec{Replicas: &Replicas{Default: new(int32(-1))}}, []string{"spec.replicas.default -1 is negative"}},
		{"request above limit", GatewayConfigSpec{Resources: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
		}}, []string{"spec.resources.requests.cpu 2 exceeds its limit 500m"}},
		{"Service type", GatewayConfigSpec{Service: &ServiceConfig{Type: new(corev1.ServiceTypeExternalName)}}, []string{`spec.service.type "ExternalName"`}},
		{"annotation key", GatewayConfigSpec{Service: &ServiceConfig{CopyAnnotations: []string{"example.com/ok", "not a key"}}}, []string{`spec.service.copyAnnotations "not a key"`}},
		{"port", GatewayConfigSpec{Consul: &ConsulConnection{GRPCPort: new(int32(0))}}, []string{"spec.consul.grpcPort 0 is not a port"}},
		{"CA key", GatewayConfigSpec{Consul: &ConsulConnection{TLS: &ConsulTLS{CASecretName: "consul-ca-cert", CASecretKey: "tls.crt"}}}, nil},
		{"CA key not a key", GatewayConfigSpec{Consul: &ConsulConnection{TLS: &ConsulTLS{CASecretKey: "../ca.crt"}}}, []string{`spec.consul.tls.caSecretKey "../ca.crt" is not a Secret key`}},
		{"metrics", GatewayConfigSpec{Metrics: &GatewayMetrics{Enabled: new(true), Port: new(int32(9102)), Path: "/stats/prometheus"}}, nil},
		{"metrics on a reserved port", GatewayConfigSpec{Metrics: &GatewayMetrics{Enabled: new(true), Port: new(int32(21000))}}, []string{"spec.metrics.port 21000 is taken by the readiness endpoint on the gateway pods"}},
		{"metrics port not a port", GatewayConfigSpec{Metrics: &GatewayMetrics{Port: new(int32(70000))}}, []string{"spec.metrics.port 70000 is not a port"}},
		{"metrics path", GatewayConfigSpec{Metrics: &GatewayMetrics{Path: "metrics?x=1"}}, []string{`spec.metrics.path "metrics?x=1" is not an absolute URL path`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.spec.Validate()
			if len(got) != len(tt.want) {
				t.Fatalf("problems %q, want %d", got, len(tt.want))
			}
			for i, want := range tt.want {
				if !strings.Contains(got[i], want) {
					t.Errorf("problem %q, want it to contain %q", got[i], want)
				}
			}
		})
	}
}
