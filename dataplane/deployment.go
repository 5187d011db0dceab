package dataplane

import (
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
)

// containerName is the gateway pods' one container's.
const containerName = "consul-dataplane"

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

// defaultResources are the consul-dataplane container's when its GatewayConfig sets
// none: consul-k8s's requests for api-gateway pods (so a pod is not BestEffort, the
// first evicted), a memory limit, and no CPU limit, which would throttle Envoy.
func defaultResources() *corev1ac.ResourceRequirementsApplyConfiguration {
	return corev1ac.ResourceRequirements().
		WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("100Mi")}).
		WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")})
}

func deployment(in Gateway, name string, labels, annotations map[string]string, owner *metav1ac.OwnerReferenceApplyConfiguration, spec v1alpha1.GatewayConfigSpec, defaults Defaults) *appsv1ac.DeploymentApplyConfiguration {
	gw := in.Gateway
	podAnnotations := maps.Clone(annotations)
	podAnnotations[connectInjectAnnotation] = "false"
	maps.Copy(podAnnotations, metricsAnnotations(spec))
	podTemplate := corev1ac.PodTemplateSpec().
		WithLabels(labels).
		WithAnnotations(podAnnotations).
		WithSpec(podSpec(in, name, spec, defaults))
	deploymentSpec := appsv1ac.DeploymentSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(gw))).
		WithStrategy(rollingUpdate()).
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
	return d.WithAnnotations(map[string]string{imageAnnotation: desiredImage(d)})
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
		WithName(containerName).
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
		// what the Gateway's Programmed message shows of a crash (firstPodProblem).
		WithTerminationMessagePolicy(corev1.TerminationMessageFallbackToLogsOnError)
	if lifecycle := preStop(orDefault(spec.Image, defaults.Image)); lifecycle != nil {
		c.WithLifecycle(lifecycle)
	}
	for _, port := range listenerPorts(in) {
		c.WithPorts(corev1ac.ContainerPort().WithName(portName(port)).WithContainerPort(port).WithProtocol(corev1.ProtocolTCP))
	}
	withMetricsPort(c, spec)
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
	}
	args = append(args, shutdownArgs(orDefault(spec.Image, defaults.Image))...)
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
	return append(args, metricsArgs(spec)...)
}

func fieldEnv(name, path string) *corev1ac.EnvVarApplyConfiguration {
	return corev1ac.EnvVar().WithName(name).WithValueFrom(corev1ac.EnvVarSource().
		WithFieldRef(corev1ac.ObjectFieldSelector().WithAPIVersion("v1").WithFieldPath(path)))
}

func orDefault(value, fallback string) string {
	if value == "" {
		return fallback
	}
	return value
}
