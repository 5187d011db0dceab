package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultImage is the consul-dataplane image gateway pods run unless a GatewayConfig
// names another: the release consul-k8s 1.1 (the line for Consul 1.15) ships with.
const DefaultImage = "hashicorp/consul-dataplane:1.1.13"

// DefaultGRPCPort is Consul's gRPC port unless a GatewayConfig names another.
const DefaultGRPCPort int32 = 8502

// Defaults of a GatewayConfig's spec.metrics: consul-k8s's (its GatewayClassConfig's
// metrics port and path), so scrape configurations written for its gateways fit.
const (
	DefaultMetricsPort int32 = 20200
	DefaultMetricsPath       = "/metrics"
)

// DefaultCASecretKey is the key of the CA certificate in a GatewayConfig's CA Secret
// unless it names another.
const DefaultCASecretKey = "ca.crt"

// GatewayConfig configures the data plane of the Gateways it applies to: those of a
// GatewayClass whose parametersRef names it (the reference must give its namespace),
// and a Gateway whose spec.infrastructure.parametersRef names it (in the Gateway's own
// namespace), which then replaces the class's.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=gateway-api
// +kubebuilder:printcolumn:name="Consul",type=string,JSONPath=`.spec.consul.address`
// +kubebuilder:printcolumn:name="Service",type=string,JSONPath=`.spec.service.type`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GatewayConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec GatewayConfigSpec `json:"spec,omitempty"`
}

// GatewayConfigSpec is how a Gateway's data plane is deployed.
type GatewayConfigSpec struct {
	// Consul is how the gateway pods reach Consul's servers. What is unset comes from
	// the controller's flags (--gateway-consul-address and the like), which default to
	// the servers the controller itself talks to.
	// +optional
	Consul *ConsulConnection `json:"consul,omitempty"`

	// Image is the consul-dataplane image of the gateway pods. Unset means
	// hashicorp/consul-dataplane:1.1.13.
	// +optional
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image,omitempty"`

	// Replicas bounds the number of gateway pods.
	// +optional
	Replicas *Replicas `json:"replicas,omitempty"`

	// Service is the Service that exposes the gateway pods.
	// +optional
	Service *ServiceConfig `json:"service,omitempty"`

	// Resources of the consul-dataplane container.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// NodeSelector of the gateway pods.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations of the gateway pods.
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// LogLevel of consul-dataplane and Envoy. Unset means info.
	// +optional
	// +kubebuilder:validation:Enum=trace;debug;info;warn;error
	LogLevel string `json:"logLevel,omitempty"`

	// Metrics makes the gateway pods serve Prometheus metrics: Envoy's and
	// consul-dataplane's, merged, on a port of the pod IP, with the prometheus.io
	// scrape annotations. Unset means none.
	// +optional
	Metrics *GatewayMetrics `json:"metrics,omitempty"`
}

// GatewayMetrics is how the gateway pods serve Prometheus metrics.
type GatewayMetrics struct {
	// Enabled turns the metrics endpoint on. Unset means off.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// Port the metrics are served on, on the pod IP. Unset means 20200. The ports the
	// pod uses otherwise are refused: 19000 (Envoy's admin), 20100 and 20101
	// (consul-dataplane's metrics) and 21000 (readiness). Keep it off the listeners'
	// ports: Envoy cannot bind both.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port *int32 `json:"port,omitempty"`

	// Path the metrics are served at. Unset means /metrics.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^/[-._~/a-zA-Z0-9]*$`
	Path string `json:"path,omitempty"`
}

// MetricsOn reports whether m turns the gateway pods' metrics on.
func (m *GatewayMetrics) MetricsOn() bool {
	return m != nil && m.Enabled != nil && *m.Enabled
}

// PortOrDefault is the metrics port, DefaultMetricsPort when unset.
func (m *GatewayMetrics) PortOrDefault() int32 {
	if m == nil || m.Port == nil {
		return DefaultMetricsPort
	}
	return *m.Port
}

// PathOrDefault is the metrics path, DefaultMetricsPath when unset.
func (m *GatewayMetrics) PathOrDefault() string {
	if m == nil || m.Path == "" {
		return DefaultMetricsPath
	}
	return m.Path
}

// ConsulConnection is how gateway pods reach Consul's servers.
type ConsulConnection struct {
	// Address of Consul's servers, as consul-dataplane's -addresses takes it: a DNS
	// name or IP, or "exec=<command>" to discover them.
	// +optional
	// +kubebuilder:validation:MinLength=1
	Address string `json:"address,omitempty"`

	// GRPCPort is the servers' gRPC port. Unset means 8502.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	GRPCPort *int32 `json:"grpcPort,omitempty"`

	// TLS, when set, makes the gateway pods speak TLS to the servers. Unset means
	// TLS with the pods' system roots when the controller talks to Consul over TLS,
	// and plaintext when it does not (on loopback, or with --consul-allow-plaintext).
	// +optional
	TLS *ConsulTLS `json:"tls,omitempty"`

	// AuthMethod, when set, is the Kubernetes auth method the gateway pods log in to
	// Consul with (ACLs on), using their ServiceAccount's token.
	// +optional
	// +kubebuilder:validation:MinLength=1
	AuthMethod string `json:"authMethod,omitempty"`
}

// ConsulTLS is the TLS the gateway pods speak to Consul's servers.
type ConsulTLS struct {
	// ServerName is the name the servers' certificate is checked against; unset
	// means the address.
	// +optional
	ServerName string `json:"serverName,omitempty"`

	// CASecretName names a Secret in the Gateway's namespace that holds the CA
	// certificate (PEM) that signs the servers' certificate; unset means the pods'
	// system roots.
	// +optional
	// +kubebuilder:validation:MinLength=1
	CASecretName string `json:"caSecretName,omitempty"`

	// CASecretKey is the key of the CA certificate in that Secret. Unset means
	// ca.crt; consul-k8s's Secret consul-ca-cert holds it under tls.crt.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	CASecretKey string `json:"caSecretKey,omitempty"`
}

// Replicas bounds the number of gateway pods. The controller sets Default; a Gateway
// may ask for another number within Min and Max (see the docs of the data plane).
//
// +kubebuilder:validation:XValidation:rule="!has(self.min) || !has(self.max) || self.min <= self.max",message="min must not exceed max"
// +kubebuilder:validation:XValidation:rule="!has(self.min) || !has(self.default) || self.min <= self.default",message="default must not be below min"
// +kubebuilder:validation:XValidation:rule="!has(self.max) || !has(self.default) || self.default <= self.max",message="default must not exceed max"
type Replicas struct {
	// Default is the number of pods of a new gateway Deployment. Unset means 1.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Default *int32 `json:"default,omitempty"`
	// Min is the fewest pods allowed.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Min *int32 `json:"min,omitempty"`
	// Max is the most pods allowed.
	// +optional
	// +kubebuilder:validation:Minimum=1
	Max *int32 `json:"max,omitempty"`
}

// ServiceConfig is the Service that exposes the gateway pods.
type ServiceConfig struct {
	// Type of the Service. Unset means LoadBalancer.
	// +optional
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	Type *corev1.ServiceType `json:"type,omitempty"`

	// CopyAnnotations are annotation keys copied from the Gateway to its Service when
	// the Gateway has them, for example a cloud load balancer's settings.
	// +optional
	// +listType=set
	CopyAnnotations []string `json:"copyAnnotations,omitempty"`
}

// GatewayConfigList is a list of GatewayConfigs.
//
// +kubebuilder:object:root=true
type GatewayConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []GatewayConfig `json:"items"`
}
