package dataplane

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var testDefaults = Defaults{Image: v1alpha1.DefaultImage, ConsulAddress: "consul-server.consul.svc", GRPCPort: 8502}

func testGateway(name string, listeners ...gatewayv1.Listener) *gatewayv1.Gateway {
	return &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, UID: types.UID("uid-" + name)},
		Spec:       gatewayv1.GatewaySpec{GatewayClassName: "consul", Listeners: listeners},
	}
}

func listener(name string, port gatewayv1.PortNumber, protocol gatewayv1.ProtocolType) gatewayv1.Listener {
	return gatewayv1.Listener{Name: gatewayv1.SectionName(name), Port: port, Protocol: protocol}
}

// TestDesired compares each case's objects with testdata/<case>.golden.yaml; run with
// -update to rewrite them after a deliberate change, and read the diff.
func TestDesired(t *testing.T) {
	class := &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "consul"}, Spec: gatewayv1.GatewayClassSpec{ControllerName: "consul-gateway-controller.github.io/gateway-controller"}}
	full := &v1alpha1.GatewayConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "full"},
		Spec: v1alpha1.GatewayConfigSpec{
			Consul: &v1alpha1.ConsulConnection{
				Address: "exec=discover-consul", GRPCPort: new(int32(8503)), AuthMethod: "consul-k8s-auth-method",
				TLS: &v1alpha1.ConsulTLS{ServerName: "server.dc1.consul", CASecretName: "consul-ca"},
			},
			Image:    "example.com/consul-dataplane:1.1.13",
			Replicas: &v1alpha1.Replicas{Default: new(int32(5)), Min: new(int32(2)), Max: new(int32(3))},
			Service:  &v1alpha1.ServiceConfig{Type: new(corev1.ServiceTypeNodePort), CopyAnnotations: []string{"lb.example.com/internal", "absent.example.com/key"}},
			Resources: &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
			},
			NodeSelector: map[string]string{"pool": "edge"},
			Tolerations:  []corev1.Toleration{{Key: "edge", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			LogLevel:     "debug",
		},
	}
	withInfra := testGateway("infra", listener("http", 80, gatewayv1.HTTPProtocolType))
	withInfra.Spec.Infrastructure = &gatewayv1.GatewayInfrastructure{
		Labels: map[gatewayv1.LabelKey]gatewayv1.LabelValue{"team": "web", GatewayNameLabel: "not-this"},
		Annotations: map[gatewayv1.AnnotationKey]gatewayv1.AnnotationValue{
			"example.com/owner": "web", "iam.gke.io/gcp-service-account": "admin@project.iam.gserviceaccount.com", "note": "kept",
		},
	}
	allowExample := testDefaults
	allowExample.InfrastructureKeys = []string{"example.com/*"}
	overTLS := testDefaults
	overTLS.TLS = true
	configured := testGateway("configured", listener("https", 443, gatewayv1.HTTPSProtocolType), listener("tcp", 5432, gatewayv1.TCPProtocolType))
	configured.Annotations = map[string]string{"lb.example.com/internal": "true", "not.copied/key": "x"}
	autoscaled := testGateway("autoscaled", listener("http", 8080, gatewayv1.HTTPProtocolType))
	autoscaled.Annotations = map[string]string{AutoscaledAnnotation: "true"}
	requested := testGateway("requested", listener("http", 80, gatewayv1.HTTPProtocolType))
	// Beside consul-k8s: its CA Secret's key, and an injector annotation the
	// operator lets through that must not reach the pods.
	beside := testGateway("beside", listener("http", 80, gatewayv1.HTTPProtocolType))
	beside.Spec.Infrastructure = &gatewayv1.GatewayInfrastructure{
		Annotations: map[gatewayv1.AnnotationKey]gatewayv1.AnnotationValue{connectInjectAnnotation: "true"},
	}
	allowConsul := overTLS
	allowConsul.InfrastructureKeys = []string{"consul.hashicorp.com/*"}
	consulK8sCA := &v1alpha1.GatewayConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: "consul", Name: "consul-k8s"},
		Spec: v1alpha1.GatewayConfigSpec{Consul: &v1alpha1.ConsulConnection{
			TLS: &v1alpha1.ConsulTLS{CASecretName: "consul-ca-cert", CASecretKey: "tls.crt"},
		}},
	}
	requested.Spec.Addresses = []gatewayv1.GatewaySpecAddress{{Value: "203.0.113.9"}}
	withMetrics := &v1alpha1.GatewayConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: "consul", Name: "metrics"},
		Spec:       v1alpha1.GatewayConfigSpec{Metrics: &v1alpha1.GatewayMetrics{Enabled: new(true), Port: new(int32(9102)), Path: "/stats"}},
	}
	metricsOff := &v1alpha1.GatewayConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: "consul", Name: "metrics-off"},
		Spec:       v1alpha1.GatewayConfigSpec{Metrics: &v1alpha1.GatewayMetrics{Enabled: new(false), Port: new(int32(9102))}},
	}
	// A consul-dataplane without -shutdown-grace-period-seconds: the kubelet's sleep
	// instead.
	oldImage := &v1alpha1.GatewayConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: "consul", Name: "old"},
		Spec:       v1alpha1.GatewayConfigSpec{Image: "registry.example.com:5000/hashicorp/consul-dataplane:1.1.2"},
	}
	for _, tc := range []struct {
		name     string
		in       Gateway
		defaults *Defaults // nil: testDefaults
	}{
		{"defaults", Gateway{Gateway: testGateway("web",
			listener("http", 80, gatewayv1.HTTPProtocolType),
			listener("http-other-host", 80, gatewayv1.HTTPProtocolType),
			listener("https", 443, gatewayv1.HTTPSProtocolType)), Class: class}, nil},
		{"full_config", Gateway{Gateway: configured, Class: class, Config: full}, nil},
		// Prefixed keys reach the objects only when the operator allows them.
		{"infrastructure", Gateway{Gateway: withInfra, Class: class}, nil},
		{"infrastructure_allowed", Gateway{Gateway: withInfra, Class: class}, &allowExample},
		{"autoscaled", Gateway{Gateway: autoscaled, Class: class}, nil},
		// The controller talks TLS to Consul: so do the pods, with their system roots.
		{"tls_by_default", Gateway{Gateway: testGateway("secure", listener("http", 80, gatewayv1.HTTPProtocolType)), Class: class}, &overTLS},
		{"requested_address", Gateway{Gateway: requested, Class: class}, nil},
		{"beside_consul_k8s", Gateway{Gateway: beside, Class: class, Config: consulK8sCA}, &allowConsul},
		// A ListenerSet port besides the Gateway's; one they share is declared once.
		{"old_dataplane", Gateway{Gateway: testGateway("old", listener("http", 80, gatewayv1.HTTPProtocolType)), Class: class, Config: oldImage}, nil},
		{"listenerset_ports", Gateway{Gateway: testGateway("merged", listener("http", 80, gatewayv1.HTTPProtocolType)), Class: class,
			ListenerSetPorts: []gatewayv1.PortNumber{8443, 80}}, nil},
		// Metrics on: consul-dataplane's flags, the named port and the scrape
		// annotations; off (enabled false, a port given): the defaults' objects.
		{"metrics", Gateway{Gateway: testGateway("web", listener("http", 80, gatewayv1.HTTPProtocolType)), Class: class, Config: withMetrics}, nil},
		{"metrics_off", Gateway{Gateway: testGateway("web", listener("http", 80, gatewayv1.HTTPProtocolType)), Class: class, Config: metricsOff}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defaults := testDefaults
			if tc.defaults != nil {
				defaults = *tc.defaults
			}
			got := goldenForm(t, Desired(tc.in, defaults))
			path := filepath.Join("testdata", tc.name+".golden.yaml")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", path, diff)
			}
		})
	}
}

func goldenForm(t *testing.T, o Objects) []byte {
	t.Helper()
	var docs []string
	for _, obj := range []any{o.ServiceAccount, o.Deployment, o.Service, o.PodDisruptionBudget} {
		data, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(data))
	}
	return []byte(strings.Join(docs, "---\n"))
}

func TestName(t *testing.T) {
	short := testGateway("web")
	if got := Name(short); got != "web-consul" {
		t.Errorf("Name = %q", got)
	}
	long := testGateway(strings.Repeat("a", 60))
	got := Name(long)
	if len(got) != 63 || !strings.HasPrefix(got, strings.Repeat("a", 54)+"-") {
		t.Errorf("Name of a long Gateway = %q (%d characters)", got, len(got))
	}
	other := testGateway(strings.Repeat("a", 59) + "b")
	if Name(other) == got {
		t.Error("two long names that differ after the cut got the same name")
	}
}

func TestReplicas(t *testing.T) {
	for _, tt := range []struct {
		r    *v1alpha1.Replicas
		want int32
	}{
		{nil, 1},
		{&v1alpha1.Replicas{Default: new(int32(3))}, 3},
		{&v1alpha1.Replicas{Min: new(int32(2))}, 2},
		{&v1alpha1.Replicas{Default: new(int32(9)), Max: new(int32(4))}, 4},
		{&v1alpha1.Replicas{Default: new(int32(0))}, 0},
	} {
		if got := replicas(tt.r); got != tt.want {
			t.Errorf("replicas(%+v) = %d, want %d", tt.r, got, tt.want)
		}
	}
}

func TestGracefulShutdownFlag(t *testing.T) {
	for image, want := range map[string]bool{
		"hashicorp/consul-dataplane:1.1.13":                  true,
		"hashicorp/consul-dataplane:1.1.3":                   true,
		"hashicorp/consul-dataplane:1.1.2":                   false,
		"hashicorp/consul-dataplane:1.0.4":                   true,
		"hashicorp/consul-dataplane:1.0.3":                   false,
		"hashicorp/consul-dataplane:1.2.0":                   true,
		"hashicorp/consul-dataplane:1.7.6-ubi":               true,
		"registry.example.com:5000/consul-dataplane:1.1.0":   false,
		"registry.example.com:5000/consul-dataplane":         true,
		"hashicorp/consul-dataplane@sha256:0123456789abcdef": true,
		"hashicorp/consul-dataplane:latest":                  true,
	} {
		if got := gracefulShutdownFlag(image); got != want {
			t.Errorf("gracefulShutdownFlag(%q) = %v, want %v", image, got, want)
		}
	}
}
