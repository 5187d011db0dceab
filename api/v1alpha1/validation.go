package v1alpha1

import (
	"fmt"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Validate returns what is wrong with spec beyond what the CRD's schema refuses, one
// message per problem, each naming its field. A GatewayConfig written before a schema
// rule existed, or by a client that skipped validation, is checked here too.
func (spec *GatewayConfigSpec) Validate() []string {
	var problems []string
	if r := spec.Replicas; r != nil {
		problems = append(problems, r.validate()...)
	}
	if spec.Resources != nil {
		problems = append(problems, validateResources(spec.Resources)...)
	}
	if spec.Service != nil {
		problems = append(problems, spec.Service.validate()...)
	}
	if c := spec.Consul; c != nil && c.GRPCPort != nil && (*c.GRPCPort < 1 || *c.GRPCPort > 65535) {
		problems = append(problems, fmt.Sprintf("spec.consul.grpcPort %d is not a port", *c.GRPCPort))
	}
	if c := spec.Consul; c != nil && c.TLS != nil && c.TLS.CASecretKey != "" {
		if errs := validation.IsConfigMapKey(c.TLS.CASecretKey); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("spec.consul.tls.caSecretKey %q is not a Secret key: %s", c.TLS.CASecretKey, errs[0]))
		}
	}
	if spec.Metrics != nil {
		problems = append(problems, spec.Metrics.validate()...)
	}
	return problems
}

// ReservedPodPorts are the ports the gateway pods use besides the listeners':
// Envoy's admin API, consul-dataplane's merged and own metrics servers (their
// defaults, which the pods keep), and Envoy's readiness endpoint.
var ReservedPodPorts = map[int32]string{
	19000: "Envoy's admin API",
	20100: "consul-dataplane's merged metrics",
	20101: "consul-dataplane's own metrics",
	21000: "the readiness endpoint",
}

// metricsPath is what a metrics path may be: Envoy matches it as a path prefix, and
// the prometheus.io/path annotation carries it as is.
var metricsPath = regexp.MustCompile(`^/[-._~/a-zA-Z0-9]*$`)

func (m *GatewayMetrics) validate() []string {
	var problems []string
	if m.Port != nil {
		switch port := *m.Port; {
		case port < 1 || port > 65535:
			problems = append(problems, fmt.Sprintf("spec.metrics.port %d is not a port", port))
		case ReservedPodPorts[port] != "":
			problems = append(problems, fmt.Sprintf("spec.metrics.port %d is taken by %s on the gateway pods", port, ReservedPodPorts[port]))
		}
	}
	if m.Path != "" && (len(m.Path) > 128 || !metricsPath.MatchString(m.Path)) {
		problems = append(problems, fmt.Sprintf("spec.metrics.path %q is not an absolute URL path of letters, digits and -._~/", m.Path))
	}
	return problems
}

func (r *Replicas) validate() []string {
	var problems []string
	for _, f := range []struct {
		name  string
		value *int32
	}{{"default", r.Default}, {"min", r.Min}, {"max", r.Max}} {
		if f.value != nil && *f.value < 0 {
			problems = append(problems, fmt.Sprintf("spec.replicas.%s %d is negative", f.name, *f.value))
		}
	}
	if r.Min != nil && r.Max != nil && *r.Min > *r.Max {
		problems = append(problems, fmt.Sprintf("spec.replicas.min %d exceeds max %d", *r.Min, *r.Max))
	}
	if r.Default != nil && r.Min != nil && *r.Default < *r.Min {
		problems = append(problems, fmt.Sprintf("spec.replicas.default %d is below min %d", *r.Default, *r.Min))
	}
	if r.Default != nil && r.Max != nil && *r.Default > *r.Max {
		problems = append(problems, fmt.Sprintf("spec.replicas.default %d exceeds max %d", *r.Default, *r.Max))
	}
	return problems
}

// validateResources refuses a request above its limit, which the API server would
// refuse on every gateway pod instead.
func validateResources(r *corev1.ResourceRequirements) []string {
	var problems []string
	for name, request := range r.Requests {
		if limit, ok := r.Limits[name]; ok && request.Cmp(limit) > 0 {
			problems = append(problems, fmt.Sprintf("spec.resources.requests.%s %s exceeds its limit %s", name, request.String(), limit.String()))
		}
	}
	return problems
}

func (s *ServiceConfig) validate() []string {
	var problems []string
	if s.Type != nil {
		switch *s.Type {
		case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		default:
			problems = append(problems, fmt.Sprintf("spec.service.type %q is not ClusterIP, NodePort or LoadBalancer", *s.Type))
		}
	}
	for _, key := range s.CopyAnnotations {
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("spec.service.copyAnnotations %q is not an annotation key: %s", key, errs[0]))
		}
	}
	return problems
}
