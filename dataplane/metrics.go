package dataplane

import (
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
)

// The gateway pods' Prometheus endpoint (GatewayConfig spec.metrics), as consul-k8s
// wires its api-gateway pods: consul-dataplane merges Envoy's /stats/prometheus
// (read on the admin port, on loopback) with its own metrics and serves them on
// 127.0.0.1:mergedMetricsPort; Envoy proxies the pod's metrics port and path there.
// Envoy opens that listener only when the instance's proxy configuration carries
// envoy_prometheus_bind_addr, which the catalog registration sets from the container
// port named MetricsPortName (PrometheusBindAddr).
const (
	// MetricsPortName names the container port of the metrics endpoint: consul-k8s's
	// name for it.
	MetricsPortName = "prometheus"
	// mergedMetricsPort is consul-dataplane's default -telemetry-prom-merge-port,
	// given explicitly so that a changed default cannot move it onto another port.
	mergedMetricsPort = 20100
)

// The scrape annotations Prometheus's kubernetes_sd pod relabelling reads.
const (
	scrapeAnnotation     = "prometheus.io/scrape"
	scrapePortAnnotation = "prometheus.io/port"
	scrapePathAnnotation = "prometheus.io/path"
)

// metricsArgs are consul-dataplane's flags for the metrics endpoint; none when it is off.
func metricsArgs(spec v1alpha1.GatewayConfigSpec) []string {
	if !spec.Metrics.MetricsOn() {
		return nil
	}
	return []string{
		// Central configuration is what points Envoy's Prometheus listener at the
		// merged metrics rather than at Envoy's admin API alone.
		"-telemetry-use-central-config=true",
		"-telemetry-prom-scrape-path=" + spec.Metrics.PathOrDefault(),
		"-telemetry-prom-merge-port=" + strconv.Itoa(mergedMetricsPort),
	}
}

// metricsAnnotations are the pod's scrape annotations; none when metrics are off.
func metricsAnnotations(spec v1alpha1.GatewayConfigSpec) map[string]string {
	if !spec.Metrics.MetricsOn() {
		return nil
	}
	return map[string]string{
		scrapeAnnotation:     "true",
		scrapePortAnnotation: strconv.Itoa(int(spec.Metrics.PortOrDefault())),
		scrapePathAnnotation: spec.Metrics.PathOrDefault(),
	}
}

// withMetricsPort declares the metrics port on the consul-dataplane container.
func withMetricsPort(c *corev1ac.ContainerApplyConfiguration, spec v1alpha1.GatewayConfigSpec) {
	if !spec.Metrics.MetricsOn() {
		return
	}
	c.WithPorts(corev1ac.ContainerPort().WithName(MetricsPortName).
		WithContainerPort(spec.Metrics.PortOrDefault()).WithProtocol(corev1.ProtocolTCP))
}

// PrometheusBindAddr is the address Envoy serves a gateway pod's metrics on, pod IP
// and the container port named MetricsPortName, or "" when the pod declares none
// (metrics off) or has no IP yet.
func PrometheusBindAddr(pod *corev1.Pod) string {
	if pod.Status.PodIP == "" {
		return ""
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == MetricsPortName {
				return net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(p.ContainerPort)))
			}
		}
	}
	return ""
}
