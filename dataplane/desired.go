package dataplane

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// Labels of every object this package writes, and of the gateway pods. The Gateway API
// names the first two (GEP-1762); ManagedByLabel is what the informers select on, so
// unrelated objects in the cluster are never cached.
const (
	GatewayNameLabel  = gatewayv1.GatewayNameLabelKey
	GatewayClassLabel = gatewayv1.GatewayClassNameLabelKey
	ManagedByLabel    = "app.kubernetes.io/managed-by"
	ManagedByValue    = "consul-gateway-controller"
)

// ManagedSelector selects the objects this package writes, and the gateway pods.
var ManagedSelector = ManagedByLabel + "=" + ManagedByValue

// AutoscaledAnnotation on a Gateway, with the value "true", leaves the replicas of its
// Deployment to whoever else sets them (a HorizontalPodAutoscaler): the controller's
// apply then carries no replicas, so it never fights them.
const AutoscaledAnnotation = "consul-gateway-controller.github.io/autoscaled"

// ControllerAnnotation on each object names the controllerName of the class it was
// deployed for. Instances of this controller with different controller names share
// ManagedByValue; this is how one tells its own objects from another's after the
// class's controllerName changed (a label value cannot hold a controllerName's "/").
const ControllerAnnotation = "consul-gateway-controller.github.io/controller-name"

// Ports of the consul-dataplane container besides the listeners'.
const (
	readyPort = 21000 // Envoy's readiness endpoint, /ready
	adminPort = 19000 // Envoy's admin API, on loopback only
)

// caMountPath is where a GatewayConfig's CA Secret is mounted, its CA under caFile
// whatever the Secret's key.
const (
	caMountPath = "/consul/tls"
	caFile      = "ca.crt"
)

// ConnectInjectAnnotation, "false" on the gateway pods, keeps consul-k8s's injector
// (connectInject.default: true) from adding a sidecar: a gateway pod is its own proxy,
// registered by this controller.
const ConnectInjectAnnotation = "consul.hashicorp.com/connect-inject"

// On SIGTERM consul-dataplane keeps Envoy serving for shutdownGracePeriod, while the
// pod leaves its Service's endpoints and the load balancers, then stops it. The pod's
// grace period leaves Envoy's exit time on top (the kubelet kills what is left).
const (
	shutdownGracePeriodSeconds    = 15
	terminationGracePeriodSeconds = 30
)

// defaultResources are the consul-dataplane container's when its GatewayConfig sets
// none: consul-k8s's requests for api-gateway pods (so a pod is not BestEffort, the
// first evicted), a memory limit, and no CPU limit, which would throttle Envoy.
func defaultResources() *corev1ac.ResourceRequirementsApplyConfiguration {
	return corev1ac.ResourceRequirements().
		WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("100Mi")}).
		WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")})
}

// Defaults are what a Gateway without a GatewayConfig (or one that leaves a field
// unset) is deployed with; they come from the controller's flags.
type Defaults struct {
	Image         string
	ConsulAddress string
	GRPCPort      int32
	// AuthMethod is the Kubernetes auth method the pods log in to Consul with; ""
	// means no login (ACLs off, or tokens given by other means).
	AuthMethod string
	// NodePrefix starts the name of the Consul node each pod is registered on:
	// SyntheticNode(NodePrefix, node). Empty means SyntheticNodePrefix.
	NodePrefix string
	// TLS makes the pods speak TLS to Consul (with their system roots) when their
	// GatewayConfig says nothing of it; false disables TLS then.
	TLS bool
	// InfrastructureKeys are the prefixed keys of spec.infrastructure labels and
	// annotations the operator lets reach the objects; the others are left out.
	InfrastructureKeys gatewayapi.KeyAllowlist
}

// AuthMethod is the Kubernetes auth method the pods of a Gateway deployed with config
// (nil for none) log in to; "" for none.
func AuthMethod(config *v1alpha1.GatewayConfig, defaults Defaults) string {
	if spec := configSpec(config); spec.Consul != nil && spec.Consul.AuthMethod != "" {
		return spec.Consul.AuthMethod
	}
	return defaults.AuthMethod
}

// Gateway is what the desired objects are built from: a Gateway whose Accepted=True
// status the API server has confirmed, its class, and the GatewayConfig it is
// deployed with (nil for none).
type Gateway struct {
	Gateway *gatewayv1.Gateway
	Class   *gatewayv1.GatewayClass
	Config  *v1alpha1.GatewayConfig
	// ListenerSetPorts are the ports of the accepted listeners of the ListenerSets
	// attached to the Gateway: Envoy serves them too, so the pods and the Service
	// declare them.
	ListenerSetPorts []gatewayv1.PortNumber
}

// Objects are the desired ServiceAccount, Deployment and Service of one Gateway, as
// server-side apply configurations: exactly the fields this controller owns.
type Objects struct {
	ServiceAccount *corev1ac.ServiceAccountApplyConfiguration
	Deployment     *appsv1ac.DeploymentApplyConfiguration
	Service        *corev1ac.ServiceApplyConfiguration
}

// Name is the name of a Gateway's ServiceAccount, Deployment and Service:
// "<gateway>-<class>" as GEP-1762 suggests, shortened with a hash when it would exceed
// the 63 characters a Service name may have.
func Name(gateway *gatewayv1.Gateway) string {
	name := gateway.Name + "-" + string(gateway.Spec.GatewayClassName)
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:54] + "-" + hex.EncodeToString(sum[:])[:8]
}

// Desired computes the objects a Gateway's data plane consists of. It is pure: the same
// input gives the same objects.
func Desired(in Gateway, defaults Defaults) Objects {
	gw := in.Gateway
	name := Name(gw)
	labels := objectLabels(in, defaults.InfrastructureKeys)
	annotations := infrastructureAnnotations(gw, defaults.InfrastructureKeys)
	owner := metav1ac.OwnerReference().
		WithAPIVersion(gatewayv1.GroupVersion.String()).WithKind("Gateway").
		WithName(gw.Name).WithUID(gw.UID).
		WithController(true).WithBlockOwnerDeletion(true)
	spec := configSpec(in.Config)

	// Only on the objects' own metadata: on the pod template it would roll the pods.
	controller := map[string]string{ControllerAnnotation: string(in.Class.Spec.ControllerName)}
	sa := corev1ac.ServiceAccount(name, gw.Namespace).
		WithLabels(labels).WithOwnerReferences(owner).WithAnnotations(annotations).WithAnnotations(controller)
	d := deployment(in, name, labels, annotations, owner, spec, defaults)
	d.WithAnnotations(controller)
	return Objects{
		ServiceAccount: sa,
		Deployment:     d,
		Service:        service(in, name, labels, owner, spec, defaults.InfrastructureKeys).WithAnnotations(controller),
	}
}

func configSpec(config *v1alpha1.GatewayConfig) v1alpha1.GatewayConfigSpec {
	if config == nil {
		return v1alpha1.GatewayConfigSpec{}
	}
	return config.Spec
}

// objectLabels are the Gateway's spec.infrastructure.labels that allowed lets
// through, then the labels that say which Gateway an object serves: those win over a
// user's label of the same key.
func objectLabels(in Gateway, allowed gatewayapi.KeyAllowlist) map[string]string {
	labels := map[string]string{}
	if infra := in.Gateway.Spec.Infrastructure; infra != nil {
		labels, _ = allowed.Filter(gatewayapi.StringMap(infra.Labels))
	}
	maps.Copy(labels, selectorLabels(in.Gateway))
	labels[GatewayClassLabel] = string(in.Gateway.Spec.GatewayClassName)
	return labels
}

// selectorLabels select a Gateway's pods. They never change for a Gateway (a
// Deployment's selector is immutable): a class change relabels, but does not reselect.
func selectorLabels(gw *gatewayv1.Gateway) map[string]string {
	return map[string]string{GatewayNameLabel: gw.Name, ManagedByLabel: ManagedByValue}
}

// SyntheticNodePrefix starts the name of every Consul node gateway pods are
// registered on, after the --consul-entry-prefix.
const SyntheticNodePrefix = "gateway-"

// SyntheticNode is the Consul node that gateway pods on the Kubernetes node are
// registered on, and that their consul-dataplane names: prefix then the node's name.
// A fixed prefix lets the controller's ACL token write only these nodes
// (node_prefix), where a suffix ("<node>-virtual") needed write on every node.
func SyntheticNode(prefix, node string) string {
	if prefix == "" {
		prefix = SyntheticNodePrefix
	}
	return prefix + node
}

// ProxyServiceID is the ID of a gateway pod's instance in Consul's catalog, which its
// consul-dataplane names with -proxy-service-id: "<pod>.<namespace>". Pods of every
// namespace share the synthetic node of their Kubernetes node, so the pod's name alone
// would let a pod of another namespace, named alike, replace the instance.
func ProxyServiceID(pod *corev1.Pod) string { return pod.Name + "." + pod.Namespace }

// OwnsPod reports whether pod is one of the Gateway's gateway pods: controlled by a
// ReplicaSet of the Gateway's Deployment (named after it and the pod's template hash),
// not merely labelled like one.
func OwnsPod(gw *gatewayv1.Gateway, pod *corev1.Pod) bool {
	ref := metav1.GetControllerOf(pod)
	hash := pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
	return ref != nil && ref.APIVersion == appsv1.SchemeGroupVersion.String() && ref.Kind == "ReplicaSet" &&
		hash != "" && ref.Name == Name(gw)+"-"+hash
}

// PodSelector selects a Gateway's pods within its namespace.
func PodSelector(gateway cache.ObjectName) labels.Selector {
	return labels.SelectorFromSet(map[string]string{GatewayNameLabel: gateway.Name, ManagedByLabel: ManagedByValue})
}

// infrastructureAnnotations are the Gateway's spec.infrastructure.annotations that
// allowed lets through.
func infrastructureAnnotations(gw *gatewayv1.Gateway, allowed gatewayapi.KeyAllowlist) map[string]string {
	if infra := gw.Spec.Infrastructure; infra != nil {
		out, _ := allowed.Filter(gatewayapi.StringMap(infra.Annotations))
		return out
	}
	return map[string]string{}
}

func deployment(in Gateway, name string, labels, annotations map[string]string, owner *metav1ac.OwnerReferenceApplyConfiguration, spec v1alpha1.GatewayConfigSpec, defaults Defaults) *appsv1ac.DeploymentApplyConfiguration {
	gw := in.Gateway
	podAnnotations := maps.Clone(annotations)
	podAnnotations[ConnectInjectAnnotation] = "false"
	podTemplate := corev1ac.PodTemplateSpec().
		WithLabels(labels).
		WithAnnotations(podAnnotations).
		WithSpec(podSpec(in, name, spec, defaults))
	deploymentSpec := appsv1ac.DeploymentSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(gw))).
		WithTemplate(podTemplate)
	if gw.Annotations[AutoscaledAnnotation] != "true" {
		deploymentSpec.WithReplicas(replicas(spec.Replicas))
	}
	d := appsv1ac.Deployment(name, gw.Namespace).
		WithLabels(labels).
		WithOwnerReferences(owner).
		WithSpec(deploymentSpec)
	if len(annotations) > 0 {
		d.WithAnnotations(annotations)
	}
	return d
}

// replicas is the default number of pods, kept within min and max; unset means 1.
func replicas(r *v1alpha1.Replicas) int32 {
	n := int32(1)
	if r == nil {
		return n
	}
	if r.Default != nil {
		n = *r.Default
	}
	if r.Min != nil && n < *r.Min {
		n = *r.Min
	}
	if r.Max != nil && n > *r.Max {
		n = *r.Max
	}
	return n
}

func podSpec(in Gateway, name string, spec v1alpha1.GatewayConfigSpec, defaults Defaults) *corev1ac.PodSpecApplyConfiguration {
	pod := corev1ac.PodSpec().
		WithServiceAccountName(name).
		WithContainers(container(in, spec, defaults)).
		WithTerminationGracePeriodSeconds(terminationGracePeriodSeconds).
		WithSecurityContext(corev1ac.PodSecurityContext().
			// Envoy binds the listeners' ports, some below 1024. Its file capability
			// cannot help: no_new_privs (allowPrivilegeEscalation: false) keeps an
			// exec from gaining one (test/node shows it). This sysctl is namespaced
			// and, since Kubernetes 1.22, in the kubelet's safe set.
			WithSysctls(corev1ac.Sysctl().WithName("net.ipv4.ip_unprivileged_port_start").WithValue("0")).
			// The image's USER 100 is numeric, so the kubelet can check this.
			WithRunAsNonRoot(true).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault)))
	if len(spec.NodeSelector) > 0 {
		pod.WithNodeSelector(spec.NodeSelector)
	}
	for i := range spec.Tolerations {
		t := spec.Tolerations[i]
		toleration := corev1ac.Toleration().WithKey(t.Key).WithOperator(t.Operator).WithValue(t.Value).WithEffect(t.Effect)
		if t.TolerationSeconds != nil {
			toleration.WithTolerationSeconds(*t.TolerationSeconds)
		}
		pod.WithTolerations(toleration)
	}
	// The root filesystem is read-only; consul-dataplane writes Envoy's bootstrap to
	// a temporary directory.
	pod.WithVolumes(corev1ac.Volume().WithName("tmp").WithEmptyDir(corev1ac.EmptyDirVolumeSource()))
	// Only the CA's key is mounted: a Secret that holds more (a key pair) keeps it.
	if tls := consulTLS(spec); tls != nil && tls.CASecretName != "" {
		pod.WithVolumes(corev1ac.Volume().WithName("consul-ca").
			WithSecret(corev1ac.SecretVolumeSource().WithSecretName(tls.CASecretName).
				WithItems(corev1ac.KeyToPath().WithKey(orDefault(tls.CASecretKey, v1alpha1.DefaultCASecretKey)).WithPath(caFile))))
	}
	return pod
}

func consulTLS(spec v1alpha1.GatewayConfigSpec) *v1alpha1.ConsulTLS {
	if spec.Consul == nil {
		return nil
	}
	return spec.Consul.TLS
}

// container runs consul-dataplane as the gateway's proxy: it logs in to Consul when an
// auth method is set, asks Consul's xDS server for the configuration of the catalog
// instance named like the pod (registered on the node SyntheticNode names), and starts
// Envoy with it.
func container(in Gateway, spec v1alpha1.GatewayConfigSpec, defaults Defaults) *corev1ac.ContainerApplyConfiguration {
	c := corev1ac.Container().
		WithName("consul-dataplane").
		WithImage(orDefault(spec.Image, defaults.Image)).
		WithArgs(dataplaneArgs(spec, defaults)...).
		WithEnv(
			fieldEnv("POD_NAME", "metadata.name"),
			fieldEnv("POD_NAMESPACE", "metadata.namespace"),
			fieldEnv("POD_IP", "status.podIP"),
			fieldEnv("NODE_NAME", "spec.nodeName"),
		).
		WithPorts(corev1ac.ContainerPort().WithName("ready").WithContainerPort(readyPort).WithProtocol(corev1.ProtocolTCP)).
		WithReadinessProbe(corev1ac.Probe().
			WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/ready").WithPort(intstr.FromString("ready"))).
			WithPeriodSeconds(5)).
		// The image's consul-dataplane and envoy carry the file capability
		// cap_net_bind_service=+ep: the kernel refuses to exec them (EPERM) unless
		// the bounding set holds NET_BIND_SERVICE, whatever else is dropped.
		WithSecurityContext(corev1ac.SecurityContext().
			WithAllowPrivilegeEscalation(false).
			WithReadOnlyRootFilesystem(true).
			WithCapabilities(corev1ac.Capabilities().WithDrop("ALL").WithAdd("NET_BIND_SERVICE"))).
		// consul-dataplane writes no termination message: the end of its log is
		// what the Gateway's Programmed message shows of a crash (PodProblem).
		WithTerminationMessagePolicy(corev1.TerminationMessageFallbackToLogsOnError)
	for _, port := range listenerPorts(in) {
		c.WithPorts(corev1ac.ContainerPort().WithName(portName(port)).WithContainerPort(port).WithProtocol(corev1.ProtocolTCP))
	}
	c.WithVolumeMounts(corev1ac.VolumeMount().WithName("tmp").WithMountPath("/tmp"))
	// A GatewayConfig's resources replace the default whole: mixed, a request of
	// one could exceed a limit of the other.
	if spec.Resources != nil {
		c.WithResources(corev1ac.ResourceRequirements().WithRequests(spec.Resources.Requests).WithLimits(spec.Resources.Limits))
	} else {
		c.WithResources(defaultResources())
	}
	if tls := consulTLS(spec); tls != nil && tls.CASecretName != "" {
		c.WithVolumeMounts(corev1ac.VolumeMount().WithName("consul-ca").WithMountPath(caMountPath).WithReadOnly(true))
	}
	return c
}

func dataplaneArgs(spec v1alpha1.GatewayConfigSpec, defaults Defaults) []string {
	consul := v1alpha1.ConsulConnection{}
	if spec.Consul != nil {
		consul = *spec.Consul
	}
	grpcPort := defaults.GRPCPort
	if consul.GRPCPort != nil {
		grpcPort = *consul.GRPCPort
	}
	args := []string{
		"-addresses=" + orDefault(consul.Address, defaults.ConsulAddress),
		"-grpc-port=" + strconv.Itoa(int(grpcPort)),
		"-proxy-service-id=$(POD_NAME).$(POD_NAMESPACE)",
		"-service-node-name=" + SyntheticNode(defaults.NodePrefix, "$(NODE_NAME)"),
		"-log-level=" + orDefault(spec.LogLevel, "info"),
		"-envoy-admin-bind-address=127.0.0.1",
		"-envoy-admin-bind-port=" + strconv.Itoa(adminPort),
		"-envoy-ready-bind-address=$(POD_IP)",
		"-envoy-ready-bind-port=" + strconv.Itoa(readyPort),
		"-shutdown-grace-period-seconds=" + strconv.Itoa(shutdownGracePeriodSeconds),
	}
	switch tls := consul.TLS; {
	case tls == nil && !defaults.TLS:
		args = append(args, "-tls-disabled")
	case tls != nil:
		if tls.ServerName != "" {
			args = append(args, "-tls-server-name="+tls.ServerName)
		}
		if tls.CASecretName != "" {
			args = append(args, "-ca-certs="+caMountPath+"/"+caFile)
		}
	}
	if authMethod := orDefault(consul.AuthMethod, defaults.AuthMethod); authMethod != "" {
		args = append(args,
			"-credential-type=login",
			"-login-auth-method="+authMethod,
			"-login-bearer-token-path=/var/run/secrets/kubernetes.io/serviceaccount/token",
		)
	}
	return args
}

func fieldEnv(name, path string) *corev1ac.EnvVarApplyConfiguration {
	return corev1ac.EnvVar().WithName(name).WithValueFrom(corev1ac.EnvVarSource().
		WithFieldRef(corev1ac.ObjectFieldSelector().WithAPIVersion("v1").WithFieldPath(path)))
}

// service exposes one port per distinct listener port; listeners sharing a port share
// the Service port (Consul's api-gateway serves them on one Envoy listener).
func service(in Gateway, name string, labels map[string]string, owner *metav1ac.OwnerReferenceApplyConfiguration, spec v1alpha1.GatewayConfigSpec, allowed gatewayapi.KeyAllowlist) *corev1ac.ServiceApplyConfiguration {
	gw := in.Gateway
	serviceType := corev1.ServiceTypeLoadBalancer
	if spec.Service != nil && spec.Service.Type != nil {
		serviceType = *spec.Service.Type
	}
	serviceSpec := corev1ac.ServiceSpec().
		WithType(serviceType).
		WithSelector(selectorLabels(gw))
	// A requested address (one IP; the status pipeline refuses anything else) is the
	// Service's own: its cluster IP, or what its load balancer is asked for.
	if len(gw.Spec.Addresses) == 1 {
		switch requested := gw.Spec.Addresses[0].Value; serviceType {
		case corev1.ServiceTypeClusterIP:
			serviceSpec.WithClusterIP(requested)
		case corev1.ServiceTypeLoadBalancer:
			serviceSpec.WithLoadBalancerIP(requested)
		}
	}
	for _, port := range listenerPorts(in) {
		serviceSpec.WithPorts(corev1ac.ServicePort().
			WithName(portName(port)).
			WithProtocol(corev1.ProtocolTCP).
			WithPort(port).
			WithTargetPort(intstr.FromInt32(port)))
	}
	svc := corev1ac.Service(name, gw.Namespace).
		WithLabels(labels).
		WithOwnerReferences(owner).
		WithSpec(serviceSpec)
	if annotations := serviceAnnotations(gw, spec, allowed); len(annotations) > 0 {
		svc.WithAnnotations(annotations)
	}
	return svc
}

// serviceAnnotations are the allowed infrastructure annotations and the Gateway's own
// annotations the GatewayConfig says to copy (only a class's may say so, see
// sync.GatewayConfigFor).
func serviceAnnotations(gw *gatewayv1.Gateway, spec v1alpha1.GatewayConfigSpec, allowed gatewayapi.KeyAllowlist) map[string]string {
	out := infrastructureAnnotations(gw, allowed)
	if spec.Service == nil {
		return out
	}
	for _, key := range spec.Service.CopyAnnotations {
		if v, ok := gw.Annotations[key]; ok {
			out[key] = v
		}
	}
	return out
}

// listenerPorts are the distinct ports of the Gateway's listeners and of its
// ListenerSets' accepted listeners, ascending.
func listenerPorts(in Gateway) []gatewayv1.PortNumber {
	var ports []gatewayv1.PortNumber
	for _, l := range in.Gateway.Spec.Listeners {
		if !slices.Contains(ports, l.Port) {
			ports = append(ports, l.Port)
		}
	}
	for _, port := range in.ListenerSetPorts {
		if !slices.Contains(ports, port) {
			ports = append(ports, port)
		}
	}
	slices.Sort(ports)
	return ports
}

func portName(port gatewayv1.PortNumber) string { return fmt.Sprintf("port-%d", port) }

func orDefault(value, fallback string) string {
	if value == "" {
		return fallback
	}
	return value
}
