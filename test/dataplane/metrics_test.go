package dataplane

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// A class whose GatewayConfig turns metrics on (spec.metrics) deploys gateway pods
// that serve them as consul-k8s's do: consul-dataplane's telemetry flags, a container
// port named prometheus, the prometheus.io scrape annotations, and catalog instances
// whose proxy configuration tells Envoy where to listen (envoy_prometheus_bind_addr,
// the pod IP and port). Off, the pods have none of it. A port the pods already use
// passes the schema and is refused: the class is Accepted=False/InvalidParameters
// naming it. A restarted controller finds the instances as it wrote them.
func TestGatewayMetricsPerClass(t *testing.T) {
	g := newGatewayCase(t, "metrics", corev1.ServiceTypeClusterIP)
	g.programmed("True/Programmed", 60*time.Second)
	service := translate.Naming{}.EntryName(g.ns, "edge")
	g.waitMetrics(service, "", "")

	updateClassConfig(t, g.ns, func(c *v1alpha1.GatewayConfig) {
		c.Spec.Metrics = &v1alpha1.GatewayMetrics{Enabled: new(true), Port: new(int32(20300)), Path: "/stats"}
	})
	g.waitMetrics(service, "20300", "/stats")
	// The catalog holds the bind address as written: a restarted controller writes
	// nothing to it.
	if n := g.restart(t, "consul_gateway_controller_consul_catalog_writes_total", "catalog"); n != 0 {
		t.Errorf("the restarted controller made %v catalog writes, want 0", n)
	}

	updateClassConfig(t, g.ns, func(c *v1alpha1.GatewayConfig) { c.Spec.Metrics.Port = new(int32(21000)) })
	testenv.Eventually(t, 30*time.Second, "class Accepted=False naming the port", func(ctx context.Context) error {
		class, err := env.GatewayClient.GatewayV1().GatewayClasses().Get(ctx, g.class, metav1.GetOptions{})
		if err != nil {
			return err
		}
		want := "False/InvalidParameters: GatewayConfig " + g.ns + "/class is invalid: spec.metrics.port 21000 is taken by the readiness endpoint on the gateway pods"
		if got := testenv.ConditionText(class.Status.Conditions, "Accepted"); got != want {
			return fmt.Errorf("Accepted %q, want %q", got, want)
		}
		return nil
	})

	// Off again, with a valid port: the pods lose it all.
	updateClassConfig(t, g.ns, func(c *v1alpha1.GatewayConfig) {
		c.Spec.Metrics = &v1alpha1.GatewayMetrics{Enabled: new(false), Port: new(int32(20300))}
	})
	g.waitMetrics(service, "", "")
}

// updateClassConfig edits the class's GatewayConfig ns/class.
func updateClassConfig(t *testing.T, ns string, edit func(*v1alpha1.GatewayConfig)) {
	t.Helper()
	configs := env.ConfigClient.GatewayConfigs(ns)
	testenv.Update(t, configs.Get, configs.Update, "class", edit)
}

// waitMetrics waits until the Gateway's pod template serves metrics on port at path,
// or serves none when port is "", and every registered instance's
// envoy_prometheus_bind_addr is its pod's IP and that port (none when port is "").
func (g *gatewayCase) waitMetrics(service, port, path string) {
	g.t.Helper()
	what := "no metrics on the gateway pods"
	if port != "" {
		what = "metrics on port " + port + " at " + path
	}
	testenv.Eventually(g.t, 60*time.Second, what, func(ctx context.Context) error {
		d, err := g.deployment(ctx)
		if err != nil {
			return err
		}
		if err := templateMetrics(d, port, path); err != nil {
			return err
		}
		return instanceMetrics(ctx, g.ns, service, port)
	})
}

func templateMetrics(d *appsv1.Deployment, port, path string) error {
	tmpl := d.Spec.Template
	c := tmpl.Spec.Containers[0]
	var flags []string
	for _, arg := range c.Args {
		if strings.HasPrefix(arg, "-telemetry-") {
			flags = append(flags, arg)
		}
	}
	var ports []string
	for _, p := range c.Ports {
		if p.Name == dataplane.MetricsPortName {
			ports = append(ports, fmt.Sprint(p.ContainerPort))
		}
	}
	annotations := map[string]string{}
	for k, v := range tmpl.Annotations {
		if strings.HasPrefix(k, "prometheus.io/") {
			annotations[k] = v
		}
	}
	if port == "" {
		if len(flags)+len(ports)+len(annotations) > 0 {
			return fmt.Errorf("metrics off, but the pod template has flags %v, ports %v, annotations %v", flags, ports, annotations)
		}
		return nil
	}
	wantFlags := []string{"-telemetry-use-central-config=true", "-telemetry-prom-scrape-path=" + path, "-telemetry-prom-merge-port=20100"}
	wantAnnotations := map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": port, "prometheus.io/path": path}
	if !slices.Equal(flags, wantFlags) || !slices.Equal(ports, []string{port}) || fmt.Sprint(annotations) != fmt.Sprint(wantAnnotations) {
		return fmt.Errorf("flags %v, prometheus ports %v, annotations %v; want %v, [%s], %v", flags, ports, annotations, wantFlags, port, wantAnnotations)
	}
	return nil
}

// instanceMetrics checks the envoy_prometheus_bind_addr of each of our instances of
// service against its pod, once every pod runs the current template.
func instanceMetrics(ctx context.Context, ns, service, port string) error {
	pods, err := env.KubeClient.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: dataplane.ManagedSelector})
	if err != nil {
		return err
	}
	podIPs := map[string]string{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		if (dataplane.PrometheusBindAddr(&p) != "") != (port != "") {
			return fmt.Errorf("pod %s still runs the earlier template", p.Name)
		}
		podIPs[dataplane.ProxyServiceID(&p)] = p.Status.PodIP
	}
	entries, _, err := env.ConsulClient.Catalog().Service(service, "", (&consulapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return err
	}
	seen := 0
	for _, e := range entries {
		ip, ok := podIPs[e.ServiceID]
		if !ok {
			continue
		}
		seen++
		var got any
		if e.ServiceProxy != nil {
			got = e.ServiceProxy.Config["envoy_prometheus_bind_addr"]
		}
		switch {
		case port == "" && got != nil:
			return fmt.Errorf("instance %s has envoy_prometheus_bind_addr %v with metrics off", e.ServiceID, got)
		case port != "" && got != ip+":"+port:
			return fmt.Errorf("instance %s has envoy_prometheus_bind_addr %v, want %s:%s", e.ServiceID, got, ip, port)
		}
	}
	if seen == 0 || seen != len(podIPs) {
		return fmt.Errorf("%d of %d pods have an instance", seen, len(podIPs))
	}
	return nil
}
