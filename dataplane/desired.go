package dataplane

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"

	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
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

// controllerAnnotation on each object names the controllerName of the class it was
// deployed for. Instances of this controller with different controller names share
// ManagedByValue; this is how one tells its own objects from another's after the
// class's controllerName changed (a label value cannot hold a controllerName's "/").
const controllerAnnotation = "consul-gateway-controller.github.io/controller-name"

// imageAnnotation on a gateway Deployment is the consul-dataplane image this
// controller last set in its pod template. A hand edit of the template's image leaves
// it, so the image is put back to it at once, while a new image from the controller's
// configuration rolls within --gateway-image-rollout-limit (rollout.go).
const imageAnnotation = "consul-gateway-controller.github.io/dataplane-image"

// connectInjectAnnotation, "false" on the gateway pods, keeps consul-k8s's injector
// (connectInject.default: true) from adding a sidecar: a gateway pod is its own proxy,
// registered by this controller.
const connectInjectAnnotation = "consul.hashicorp.com/connect-inject"

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

// Objects are the desired ServiceAccount, Deployment, Service and PodDisruptionBudget
// of one Gateway, as
// server-side apply configurations: exactly the fields this controller owns.
type Objects struct {
	ServiceAccount *corev1ac.ServiceAccountApplyConfiguration
	Deployment     *appsv1ac.DeploymentApplyConfiguration
	Service        *corev1ac.ServiceApplyConfiguration
	// PodDisruptionBudget keeps node drains from taking more than one of the pods
	// at a time (disruption.go).
	PodDisruptionBudget *policyv1ac.PodDisruptionBudgetApplyConfiguration
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
	controller := map[string]string{controllerAnnotation: string(in.Class.Spec.ControllerName)}
	sa := corev1ac.ServiceAccount(name, gw.Namespace).
		WithLabels(labels).WithOwnerReferences(owner).WithAnnotations(annotations).WithAnnotations(controller)
	d := deployment(in, name, labels, annotations, owner, spec, defaults)
	d.WithAnnotations(controller)
	return Objects{
		ServiceAccount: sa,
		Deployment:     d,
		Service:        service(in, name, labels, owner, spec, defaults.InfrastructureKeys).WithAnnotations(controller),
		PodDisruptionBudget: podDisruptionBudget(gw, name, labels, owner).
			WithAnnotations(annotations).WithAnnotations(controller),
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

// infrastructureAnnotations are the Gateway's spec.infrastructure.annotations that
// allowed lets through.
func infrastructureAnnotations(gw *gatewayv1.Gateway, allowed gatewayapi.KeyAllowlist) map[string]string {
	if infra := gw.Spec.Infrastructure; infra != nil {
		out, _ := allowed.Filter(gatewayapi.StringMap(infra.Annotations))
		return out
	}
	return map[string]string{}
}
