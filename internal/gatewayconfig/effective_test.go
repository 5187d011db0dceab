package gatewayconfig

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
)

// A Gateway's own GatewayConfig changes its class's only where a tenant may: never
// the image, the Consul connection or the copied annotations, and replicas within
// the class's bounds.
func TestEffective(t *testing.T) {
	class := &v1alpha1.GatewayConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "class"},
		Spec: v1alpha1.GatewayConfigSpec{
			Image:    "example.com/consul-dataplane:1",
			Consul:   &v1alpha1.ConsulConnection{Address: "consul.infra", AuthMethod: "k8s"},
			Replicas: &v1alpha1.Replicas{Default: new(int32(2)), Min: new(int32(1)), Max: new(int32(4))},
			Service:  &v1alpha1.ServiceConfig{CopyAnnotations: []string{"lb.example.com/scheme"}},
			LogLevel: "info",
		},
	}
	gatewayConfig := func(spec v1alpha1.GatewayConfigSpec) *v1alpha1.GatewayConfig {
		return &v1alpha1.GatewayConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "own"}, Spec: spec}
	}
	for _, tc := range []struct {
		name    string
		class   *v1alpha1.GatewayConfig
		own     v1alpha1.GatewayConfigSpec
		want    v1alpha1.GatewayConfigSpec
		problem string
	}{{
		name:  "overrides what a tenant may choose",
		class: class,
		own: v1alpha1.GatewayConfigSpec{
			Replicas: &v1alpha1.Replicas{Default: new(int32(3))},
			Service:  &v1alpha1.ServiceConfig{Type: new(corev1.ServiceTypeClusterIP)},
			LogLevel: "debug", NodeSelector: map[string]string{"pool": "edge"},
		},
		want: v1alpha1.GatewayConfigSpec{
			Image:    "example.com/consul-dataplane:1",
			Consul:   &v1alpha1.ConsulConnection{Address: "consul.infra", AuthMethod: "k8s"},
			Replicas: &v1alpha1.Replicas{Default: new(int32(3)), Min: new(int32(1)), Max: new(int32(4))},
			Service:  &v1alpha1.ServiceConfig{Type: new(corev1.ServiceTypeClusterIP), CopyAnnotations: []string{"lb.example.com/scheme"}},
			LogLevel: "debug", NodeSelector: map[string]string{"pool": "edge"},
		},
	}, {
		name:  "metrics are the Gateway's to turn on",
		class: class,
		own:   v1alpha1.GatewayConfigSpec{Metrics: &v1alpha1.GatewayMetrics{Enabled: new(true), Port: new(int32(9102))}},
		want: v1alpha1.GatewayConfigSpec{
			Image:    "example.com/consul-dataplane:1",
			Consul:   &v1alpha1.ConsulConnection{Address: "consul.infra", AuthMethod: "k8s"},
			Replicas: &v1alpha1.Replicas{Default: new(int32(2)), Min: new(int32(1)), Max: new(int32(4))},
			Service:  &v1alpha1.ServiceConfig{CopyAnnotations: []string{"lb.example.com/scheme"}},
			LogLevel: "info",
			Metrics:  &v1alpha1.GatewayMetrics{Enabled: new(true), Port: new(int32(9102))},
		},
	}, {
		name:    "image and Consul connection are the class's",
		class:   class,
		own:     v1alpha1.GatewayConfigSpec{Image: "evil/proxy", Consul: &v1alpha1.ConsulConnection{Address: "attacker.example"}},
		problem: "sets spec.image and spec.consul, which only its GatewayClass's GatewayConfig may set",
	}, {
		name:    "copied annotations are the class's",
		own:     v1alpha1.GatewayConfigSpec{Service: &v1alpha1.ServiceConfig{CopyAnnotations: []string{"iam.gke.io/gcp-service-account"}}},
		problem: "sets spec.service.copyAnnotations",
	}, {
		name:    "replicas above the class's max",
		class:   class,
		own:     v1alpha1.GatewayConfigSpec{Replicas: &v1alpha1.Replicas{Default: new(int32(5))}},
		problem: "asks for spec.replicas.default 5; its class allows 1 to 4",
	}, {
		name:    "replicas bounded without a class max",
		own:     v1alpha1.GatewayConfigSpec{Replicas: &v1alpha1.Replicas{Max: new(int32(100))}},
		problem: "asks for spec.replicas.max 100; its class allows 0 to 8",
	}, {
		name: "no class config: bounds filled in",
		own:  v1alpha1.GatewayConfigSpec{Replicas: &v1alpha1.Replicas{Default: new(int32(3))}},
		want: v1alpha1.GatewayConfigSpec{Replicas: &v1alpha1.Replicas{Default: new(int32(3)), Min: new(int32(0)), Max: new(int32(maxGatewayReplicas))}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, problem := effective(tc.class, gatewayConfig(tc.own))
			if tc.problem != "" {
				if !strings.Contains(problem, tc.problem) || got != nil {
					t.Fatalf("problem %q, config %v; want a problem containing %q", problem, got, tc.problem)
				}
				return
			}
			if problem != "" {
				t.Fatalf("problem %q", problem)
			}
			if diff := cmp.Diff(tc.want, got.Spec); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
			if got.Name != "own" || class.Spec.Replicas.Default == nil || *class.Spec.Replicas.Default != 2 {
				t.Errorf("the result is not the Gateway's config, or the class's config was changed")
			}
		})
	}
}
