// Package options owns the controller's command-line flags: their defaults, their
// grouping in --help and their validation, as plain values. It imports no package of
// this module: the command converts the values into its parts' configurations, and the
// read-only commands reuse the Consul connection (ConsulConnection) without pulling in
// the controller.
package options

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Options are the controller's settings.
type Options struct {
	Kubeconfig     string
	ControllerName string
	KubeAPIQPS     float32
	KubeAPIBurst   int
	// SecretAPIQPS and SecretAPIBurst are the budget of the Secret watches' lists and
	// watches, apart from KubeAPIQPS.
	SecretAPIQPS   float32
	SecretAPIBurst int
	// SecretsPerNamespace caps the Secrets watched for one namespace's listeners.
	SecretsPerNamespace int

	GatewayWorkers int
	RouteWorkers   int
	ConsulWorkers  int

	MetricsBindAddress     string
	HealthProbeBindAddress string
	// MetricsAuth is how /metrics checks its callers: MetricsAuthKubernetes or
	// MetricsAuthNone.
	MetricsAuth string
	// Profiling serves pprof on ProfilingBindAddress, which Validate requires to be a
	// loopback address unless ProfilingAllowNonLoopback.
	Profiling                 bool
	ProfilingBindAddress      string
	ProfilingAllowNonLoopback bool
	// MemoryLimit is the memory the process may use (the container's limit, a
	// quantity such as 512Mi); "" or "0" for none. The command sets Go's soft memory
	// limit below it.
	MemoryLimit string

	LeaderElect bool
	Leader      LeaderElection

	ClusterID string
	// Consul is where and with what the controller reaches Consul; the read-only
	// commands make the same connection, with the same check.
	Consul ConsulConnection
	Naming ConsulNaming
	// ManageServiceDefaults writes service-defaults with protocol http for HTTP
	// backends that have none.
	ManageServiceDefaults bool
	// ServiceDefaultsGrace keeps owned service-defaults of an existing Service a while
	// after their last route (package consul says why).
	ServiceDefaultsGrace time.Duration
	// ManageIntentions keeps, for each service a route of ours sends to, a
	// service-intentions source allowing the route's gateways (package
	// consul/intentions).
	ManageIntentions bool
	// ResponderService is the Consul service name of the responder (the
	// `responder` command): rules without a valid backend and RequestRedirect rules
	// are sent to it. Empty sends the former to the blackhole (503) and refuses the
	// latter.
	ResponderService string

	// DeployGateways runs the data plane: each accepted Gateway gets its gateway pods
	// and Service (package dataplane).
	DeployGateways bool
	// RequireAdmissionPolicy makes the controller check at start, when it deploys
	// gateways, that the admission policy of deploy/ refuses it what it must, and
	// refuse to start if not.
	RequireAdmissionPolicy bool
	DataplaneWorkers       int
	// Gateway holds the defaults of gateway pods without a GatewayConfig saying
	// otherwise.
	Gateway GatewayPods
}

// LeaderElection is the Lease the writers run under, and its timing.
type LeaderElection struct {
	Namespace, Name string
	// Identity is this replica's name in the Lease; empty means the pod's name
	// ($HOSTNAME), resolved by the command, so --help does not depend on the machine.
	Identity      string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// ConsulNaming is where in Consul the entries go, and how their names start.
type ConsulNaming struct {
	// Prefix starts every entry name.
	Prefix string
	// Partition is the Consul Enterprise admin partition of every entry.
	Partition string
	// DestinationNamespace is the Consul Enterprise namespace of every entry.
	DestinationNamespace string
	// MirrorNamespaces puts entries into the Consul namespace named like their
	// Kubernetes namespace, MirrorPrefix first.
	MirrorNamespaces bool
	MirrorPrefix     string
}

// ConsulNamespaces reports whether entries go into Consul Enterprise namespaces.
func (n ConsulNaming) ConsulNamespaces() bool {
	return n.MirrorNamespaces || n.DestinationNamespace != ""
}

// GatewayPods are the settings of gateway pods whose GatewayConfig says nothing else.
type GatewayPods struct {
	Image string
	// ConsulAddress is the Consul server address of the pods; empty means the host of
	// the controller's own Consul HTTP address.
	ConsulAddress string
	GRPCPort      int32
	// InfrastructureKeys are the prefixed label and annotation keys of a Gateway's
	// spec.infrastructure that reach its objects.
	InfrastructureKeys []string
	// AuthMethod is the Kubernetes auth method in Consul the pods log in to; empty for
	// none.
	AuthMethod string
	// ImageRolloutLimit is how many gateway Deployments may roll to a new image at
	// once: a number, or a percentage of them.
	ImageRolloutLimit string
}

// Defaults are the defaults that the controller's parts own (the controller name, the
// Secrets cap, the service-defaults grace, the gateway image and gRPC port): the
// command passes them in, so the flags show them without this package importing the
// parts.
type Defaults struct {
	ControllerName       string
	SecretsPerNamespace  int
	ServiceDefaultsGrace time.Duration
	GatewayImage         string
	GatewayGRPCPort      int32
	// GatewayImageRolloutLimit is --gateway-image-rollout-limit's.
	GatewayImageRolloutLimit string
}

// SharedClusterID is the --cluster-id earlier versions defaulted to, and the kustomize
// base set: every cluster installed with defaults had it.
const SharedClusterID = "default"

// The values of --metrics-auth.
const (
	// MetricsAuthKubernetes serves /metrics only to a bearer token the API server
	// authenticates (TokenReview) for a user allowed to get the non-resource URL
	// /metrics (SubjectAccessReview), as kube components do.
	MetricsAuthKubernetes = "kubernetes"
	// MetricsAuthNone serves /metrics to anyone who reaches the address.
	MetricsAuthNone = "none"
)

// New returns the defaults: d, and those of the process itself.
func New(d Defaults) *Options {
	return &Options{
		ControllerName:         d.ControllerName,
		KubeAPIQPS:             20,
		KubeAPIBurst:           30,
		SecretAPIQPS:           10,
		SecretAPIBurst:         20,
		SecretsPerNamespace:    d.SecretsPerNamespace,
		GatewayWorkers:         2,
		RouteWorkers:           4,
		ConsulWorkers:          2,
		ServiceDefaultsGrace:   d.ServiceDefaultsGrace,
		ManageIntentions:       true,
		DeployGateways:         true,
		RequireAdmissionPolicy: true,
		DataplaneWorkers:       2,
		Gateway:                GatewayPods{Image: d.GatewayImage, GRPCPort: d.GatewayGRPCPort, ImageRolloutLimit: d.GatewayImageRolloutLimit},
		LeaderElect:            true,
		MetricsBindAddress:     ":8080",
		HealthProbeBindAddress: ":8081",
		MetricsAuth:            MetricsAuthKubernetes,
		ProfilingBindAddress:   "127.0.0.1:6060",
		// kube-controller-manager's timing: 5s of margin for writers to stop.
		Leader: LeaderElection{
			Namespace:     "consul-gateway-controller",
			Name:          "consul-gateway-controller",
			LeaseDuration: 15 * time.Second,
			RenewDeadline: 10 * time.Second,
			RetryPeriod:   2 * time.Second,
		},
	}
}

// ClusterIDOf is the --cluster-id derived when none is given, from the UID of the
// cluster's kube-system Namespace: unique per cluster, and as long-lived.
func ClusterIDOf(kubeSystemUID types.UID) string { return "k8s-" + string(kubeSystemUID) }
