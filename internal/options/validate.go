package options

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Validate returns every invalid setting this package can judge, one line each. The
// rules the controller's parts own (the ownership meta's limits, the Lease timing, the
// infrastructure key patterns) are checked by the command against them.
func (o *Options) Validate() error {
	var errs []error
	if name := o.ControllerName; !strings.Contains(name, "/") || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") {
		errs = append(errs, fmt.Errorf("--controller-name %q: want DOMAIN/PATH", name))
	}
	errs = append(errs, o.validateCounts()...)
	if o.Naming.MirrorNamespaces && o.Naming.DestinationNamespace != "" {
		errs = append(errs, errors.New("--consul-mirror-namespaces and --consul-destination-namespace: choose one"))
	}
	if !o.Naming.MirrorNamespaces && o.Naming.MirrorPrefix != "" {
		errs = append(errs, errors.New("--consul-mirror-namespaces-prefix needs --consul-mirror-namespaces"))
	}
	if o.Gateway.AuthMethod != "" && !o.DeployGateways {
		errs = append(errs, errors.New("--gateway-auth-method needs --deploy-gateways: it manages the identity of the gateway pods the controller deploys"))
	}
	if err := o.Consul.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.MetricsAuth != MetricsAuthKubernetes && o.MetricsAuth != MetricsAuthNone {
		errs = append(errs, fmt.Errorf("--metrics-auth %q: want %s or %s", o.MetricsAuth, MetricsAuthKubernetes, MetricsAuthNone))
	}
	if err := o.validateProfiling(); err != nil {
		errs = append(errs, err)
	}
	if _, err := o.MemoryLimitBytes(); err != nil {
		errs = append(errs, err)
	}
	if o.Gateway.GRPCPort < 1 || o.Gateway.GRPCPort > 65535 {
		errs = append(errs, fmt.Errorf("--gateway-consul-grpc-port %d: want a port", o.Gateway.GRPCPort))
	}
	return errors.Join(errs...)
}

// validateCounts refuses worker counts, bursts, caps and rates that would stop the
// controller from doing anything.
func (o *Options) validateCounts() []error {
	var errs []error
	for _, f := range []struct {
		name string
		n    int
	}{{"--gateway-workers", o.GatewayWorkers}, {"--route-workers", o.RouteWorkers}, {"--consul-workers", o.ConsulWorkers}, {"--kube-api-burst", o.KubeAPIBurst}, {"--secret-api-burst", o.SecretAPIBurst}, {"--secrets-per-namespace", o.SecretsPerNamespace}, {"--dataplane-workers", o.DataplaneWorkers}} {
		if f.n < 1 {
			errs = append(errs, fmt.Errorf("%s %d: want at least 1", f.name, f.n))
		}
	}
	if o.KubeAPIQPS <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps %v: want more than 0", o.KubeAPIQPS))
	}
	if o.SecretAPIQPS <= 0 {
		errs = append(errs, fmt.Errorf("--secret-api-qps %v: want more than 0", o.SecretAPIQPS))
	}
	return errs
}

// validateProfiling refuses to serve the profiles on an address other hosts reach,
// unless the operator says so with --profiling-allow-non-loopback.
func (o *Options) validateProfiling() error {
	if !o.Profiling || o.ProfilingBindAddress == "0" || o.ProfilingAllowNonLoopback {
		return nil
	}
	host, _, err := net.SplitHostPort(o.ProfilingBindAddress)
	if err != nil {
		return fmt.Errorf("--profiling-bind-address %q: %w", o.ProfilingBindAddress, err)
	}
	if !isLoopback(host) {
		return fmt.Errorf("--profiling-bind-address %q is not a loopback address: the profiles have no authentication; bind 127.0.0.1 or [::1] and use kubectl port-forward, or add --profiling-allow-non-loopback", o.ProfilingBindAddress)
	}
	return nil
}

// isLoopback reports whether host, of an address to listen on, is loopback only: a
// loopback IP or "localhost". An empty host means every interface.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// MemoryLimitBytes is MemoryLimit in bytes; 0 for none.
func (o *Options) MemoryLimitBytes() (int64, error) {
	if o.MemoryLimit == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(o.MemoryLimit)
	if err != nil || q.Sign() < 0 {
		return 0, fmt.Errorf("--memory-limit %q: want a quantity of bytes, such as 512Mi", o.MemoryLimit)
	}
	return q.Value(), nil
}
