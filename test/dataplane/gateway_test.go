package dataplane

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// A Gateway gets its ServiceAccount, Deployment and Service, owned by it; its pods
// become Ready on a fake Node; its address is its Service's; then it is Programmed.
// Its objects follow its listeners and its GatewayConfig, take back a hand edit of a
// field the controller owns, leave alone fields set by others, and go with the
// Gateway. A restart against the converged cluster applies nothing.
func TestGatewayDataPlane(t *testing.T) {
	ctx := t.Context()
	g := newGatewayCase(t, "dp", corev1.ServiceTypeClusterIP)

	gw := g.programmed("True/Programmed", 60*time.Second)
	svc, err := g.service(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(gw.Status.Addresses) != 1 || gw.Status.Addresses[0].Value != svc.Spec.ClusterIP || *gw.Status.Addresses[0].Type != gatewayv1.IPAddressType {
		t.Errorf("addresses %v, want the Service's cluster IP %s", gw.Status.Addresses, svc.Spec.ClusterIP)
	}
	if got := servicePorts(svc); !slices.Equal(got, []int32{80, 443}) {
		t.Errorf("Service ports %v, want 80 and 443", got)
	}
	if svc.Annotations["lb.example.com/scheme"] != "internal" {
		t.Errorf("Service annotations %v lack the copied lb.example.com/scheme", svc.Annotations)
	}
	d, err := g.deployment(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sa, err := env.KubeClient.CoreV1().ServiceAccounts(g.ns).Get(ctx, g.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range []metav1.Object{d, svc, sa} {
		if !metav1.IsControlledBy(obj, gw) {
			t.Errorf("%s is not controlled by the Gateway: %v", obj.GetName(), obj.GetOwnerReferences())
		}
		l := obj.GetLabels()
		if l[gatewayv1.GatewayNameLabelKey] != "edge" || l[gatewayv1.GatewayClassNameLabelKey] != g.class || l["team"] != "edge" {
			t.Errorf("%s labels %v", obj.GetName(), l)
		}
	}
	if d.Spec.Template.Spec.ServiceAccountName != g.name {
		t.Errorf("Deployment serviceAccount %q, want %q", d.Spec.Template.Spec.ServiceAccountName, g.name)
	}
	// Programmed needs one Ready pod; the second follows.
	testenv.Eventually(t, 30*time.Second, "2 ready replicas", func(ctx context.Context) error {
		d, err := g.deployment(ctx)
		if err != nil {
			return err
		}
		if d.Status.ReadyReplicas != 2 {
			return fmt.Errorf("ready %d", d.Status.ReadyReplicas)
		}
		return nil
	})

	// Listeners change: the Service follows.
	updateGateway(t, g, func(gw *gatewayv1.Gateway) {
		gw.Spec.Listeners = append(gw.Spec.Listeners, gatewayv1.Listener{Name: "tcp", Port: 5432, Protocol: gatewayv1.TCPProtocolType})
	})
	testenv.Eventually(t, 30*time.Second, "the Service gains port 5432", func(ctx context.Context) error {
		svc, err := g.service(ctx)
		if err != nil {
			return err
		}
		if got := servicePorts(svc); !slices.Equal(got, []int32{80, 443, 5432}) {
			return fmt.Errorf("ports %v", got)
		}
		return nil
	})

	// The GatewayConfig changes: the Deployment rolls.
	updateConfig(t, g.ns, func(c *v1alpha1.GatewayConfig) { c.Spec.Replicas.Default = new(int32(3)) })
	testenv.Eventually(t, 60*time.Second, "3 ready replicas", func(ctx context.Context) error {
		d, err := g.deployment(ctx)
		if err != nil {
			return err
		}
		if *d.Spec.Replicas != 3 || d.Status.ReadyReplicas != 3 {
			return fmt.Errorf("replicas %d, ready %d", *d.Spec.Replicas, d.Status.ReadyReplicas)
		}
		return nil
	})

	// A hand edit of the image (a field the controller owns) is put back; an
	// annotation someone else adds stays.
	// The Deployment controller writes the status meanwhile: a user's edit retries on
	// a conflict, as kubectl edit does.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := g.deployment(ctx)
		if err != nil {
			return err
		}
		d.Spec.Template.Spec.Containers[0].Image = "example.com/hand-edited:1"
		d.Annotations["example.com/owner"] = "platform-team"
		_, err = env.KubeClient.AppsV1().Deployments(g.ns).Update(ctx, d, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the image is put back, the annotation stays", func(ctx context.Context) error {
		d, err := g.deployment(ctx)
		if err != nil {
			return err
		}
		if image := d.Spec.Template.Spec.Containers[0].Image; image != v1alpha1.DefaultImage {
			return fmt.Errorf("image %q", image)
		}
		if d.Annotations["example.com/owner"] != "platform-team" {
			return fmt.Errorf("annotations %v", d.Annotations)
		}
		return nil
	})

	// The Service type changes to NodePort: the addresses become the IPs of the nodes
	// the Ready gateway pods run on.
	updateConfig(t, g.ns, func(c *v1alpha1.GatewayConfig) { c.Spec.Service.Type = new(corev1.ServiceTypeNodePort) })
	testenv.Eventually(t, 30*time.Second, "the Gateway's address is its node's", func(ctx context.Context) error {
		gw, err := g.gateway(ctx)
		if err != nil {
			return err
		}
		if got := addressStrings(gw.Status.Addresses); fmt.Sprint(got) != fmt.Sprint([]string{"IPAddress=" + testenv.NodeIP}) {
			return fmt.Errorf("addresses %v", got)
		}
		return nil
	})
	updateConfig(t, g.ns, func(c *v1alpha1.GatewayConfig) { c.Spec.Service.Type = new(corev1.ServiceTypeClusterIP) })

	// Invalid parameters deploy nothing new: the Deployment stays as it is.
	d, err = g.deployment(ctx)
	if err != nil {
		t.Fatal(err)
	}
	updateConfig(t, g.ns, func(c *v1alpha1.GatewayConfig) {
		c.Spec.Replicas.Default = new(int32(1))
		c.Spec.Resources = &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
		}
	})
	g.condition("Accepted", "False/InvalidParameters", 30*time.Second)
	// The data plane's queue synced the Gateway's key after the edit and went idle: a
	// wrong apply would have landed.
	testenv.Settled(t, g.controller, "dataplane")
	after, err := g.deployment(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Generation != d.Generation || *after.Spec.Replicas != 3 {
		t.Errorf("invalid parameters changed the Deployment: generation %d -> %d, replicas %d", d.Generation, after.Generation, *after.Spec.Replicas)
	}
	updateConfig(t, g.ns, func(c *v1alpha1.GatewayConfig) { c.Spec.Resources = nil })
	g.programmed("True/Programmed", 60*time.Second)

	// A restart against the converged cluster applies nothing: by its count, and by
	// the versions the API server holds of the Gateway's objects.
	testenv.Settled(t, g.controller, "dataplane")
	before, err := env.GatewayObjectVersions(ctx, g.ns)
	if err != nil {
		t.Fatal(err)
	}
	if n := g.restart(t, "consul_gateway_controller_gateway_object_applies_total", "dataplane"); n != 0 {
		t.Errorf("the restarted controller applied %v gateway objects, want 0", n)
	}
	now, err := env.GatewayObjectVersions(ctx, g.ns)
	if err != nil {
		t.Fatal(err)
	}
	if changes := before.Changes(now); len(changes) > 0 {
		t.Errorf("the restarted controller changed the Gateway's objects: %s", strings.Join(changes, "; "))
	}

	// Deleting the Gateway lets the garbage collector remove what it owned.
	if err := env.GatewayClient.GatewayV1().Gateways(g.ns).Delete(ctx, "edge", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "the Gateway's objects are garbage-collected", func(ctx context.Context) error {
		var left []string
		if _, err := g.deployment(ctx); err == nil {
			left = append(left, "Deployment")
		}
		if _, err := g.service(ctx); err == nil {
			left = append(left, "Service")
		}
		if _, err := env.KubeClient.CoreV1().ServiceAccounts(g.ns).Get(ctx, g.name, metav1.GetOptions{}); err == nil {
			left = append(left, "ServiceAccount")
		}
		if len(left) > 0 {
			return fmt.Errorf("left: %v", left)
		}
		return nil
	})
}

// A LoadBalancer Service without ingress leaves the Gateway AddressNotAssigned; the
// ingress a cloud load balancer would write makes it the Gateway's address.
func TestGatewayLoadBalancerAddress(t *testing.T) {
	g := newGatewayCase(t, "lb", corev1.ServiceTypeLoadBalancer)
	g.programmed("False/AddressNotAssigned", 60*time.Second)

	// The condition can come before the Service does: the data plane reports its state
	// while it applies the Gateway's objects.
	testenv.Eventually(t, 30*time.Second, "the gateway Service exists", func(ctx context.Context) error {
		_, err := g.service(ctx)
		return err
	})
	// As a cloud load balancer controller would, retrying on a conflict.
	services := env.KubeClient.CoreV1().Services(g.ns)
	testenv.Update(t, services.Get, services.UpdateStatus, g.name, func(svc *corev1.Service) {
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}, {Hostname: "edge.lb.example.com"}}
	})

	gw := g.programmed("True/Programmed", 30*time.Second)
	want := []gatewayv1.GatewayStatusAddress{
		{Type: new(gatewayv1.IPAddressType), Value: "203.0.113.7"},
		{Type: new(gatewayv1.HostnameAddressType), Value: "edge.lb.example.com"},
	}
	if fmt.Sprint(addressStrings(gw.Status.Addresses)) != fmt.Sprint(addressStrings(want)) {
		t.Errorf("addresses %v, want %v", addressStrings(gw.Status.Addresses), addressStrings(want))
	}
}

// An autoscaled Gateway's Deployment carries no replicas of the controller's: what
// an autoscaler sets stays.
func TestAutoscaledReplicasLeftAlone(t *testing.T) {
	ctx := t.Context()
	g := newGatewayCase(t, "hpa", corev1.ServiceTypeClusterIP)
	g.programmed("True/Programmed", 60*time.Second)
	updateGateway(t, g, func(gw *gatewayv1.Gateway) { gw.Annotations[dataplane.AutoscaledAnnotation] = "true" })
	// The autoscaler's write, through the scale subresource as an HPA does.
	testenv.Eventually(t, 30*time.Second, "the controller gives up replicas", func(ctx context.Context) error {
		d, err := g.deployment(ctx)
		if err != nil {
			return err
		}
		for _, m := range d.ManagedFields {
			if m.Manager == "consul-gateway-controller" && strings.Contains(m.FieldsV1.GetRawString(), `"f:replicas"`) {
				return fmt.Errorf("the controller still manages spec.replicas")
			}
		}
		return nil
	})
	scale := []byte(`{"spec":{"replicas":4}}`)
	if _, err := env.KubeClient.AppsV1().Deployments(g.ns).Patch(ctx, g.name, types.MergePatchType, scale, metav1.PatchOptions{FieldManager: "horizontal-pod-autoscaler"}, "scale"); err != nil {
		t.Fatal(err)
	}
	// Another change makes the controller apply again; replicas must survive it.
	updateGateway(t, g, func(gw *gatewayv1.Gateway) {
		gw.Spec.Listeners = append(gw.Spec.Listeners, gatewayv1.Listener{Name: "alt", Port: 8080, Protocol: gatewayv1.HTTPProtocolType})
	})
	testenv.Eventually(t, 30*time.Second, "the Service gains port 8080", func(ctx context.Context) error {
		svc, err := g.service(ctx)
		if err != nil {
			return err
		}
		if !slices.Contains(servicePorts(svc), 8080) {
			return fmt.Errorf("ports %v", servicePorts(svc))
		}
		return nil
	})
	d, err := g.deployment(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 4 {
		t.Errorf("replicas %d after the controller applied again, want the autoscaler's 4", *d.Spec.Replicas)
	}
}

// A requested address becomes the gateway Service's cluster IP, and the Gateway's
// address; one that cannot be honoured (a hostname) makes the Gateway
// UnsupportedAddress.
func TestRequestedAddress(t *testing.T) {
	ctx := t.Context()
	g := newGatewayCase(t, "addr", corev1.ServiceTypeClusterIP)
	g.programmed("True/Programmed", 60*time.Second)
	// A cluster IP cannot change in place: the test asks for one before the Service
	// exists, on a second Gateway of the same class and config.
	gw := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: "fixed"},
		Spec: gatewayv1.GatewaySpec{
			GatewayClassName: gatewayv1.ObjectName(g.class),
			Addresses:        []gatewayv1.GatewaySpecAddress{{Value: "10.96.200.200"}},
			Infrastructure: &gatewayv1.GatewayInfrastructure{ParametersRef: &gatewayv1.LocalParametersReference{
				Group: v1alpha1.GroupName, Kind: v1alpha1.GatewayConfigKind, Name: "edge",
			}},
			Listeners: []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}},
		},
	}
	gateways := env.GatewayClient.GatewayV1().Gateways(g.ns)
	if _, err := gateways.Create(ctx, gw, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "the requested address is the Gateway's", func(ctx context.Context) error {
		got, err := gateways.Get(ctx, "fixed", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p := testenv.ConditionText(got.Status.Conditions, "Programmed"); !strings.HasPrefix(p, "True/Programmed") {
			return fmt.Errorf("Programmed %q", p)
		}
		if a := addressStrings(got.Status.Addresses); fmt.Sprint(a) != "[IPAddress=10.96.200.200]" {
			return fmt.Errorf("addresses %v", a)
		}
		return nil
	})

	hostname := gatewayv1.HostnameAddressType
	updateGateway(t, g, func(gw *gatewayv1.Gateway) {
		gw.Spec.Addresses = []gatewayv1.GatewaySpecAddress{{Type: &hostname, Value: "edge.example.com"}}
	})
	g.condition("Accepted", "False/UnsupportedAddress: spec.addresses: type Hostname is not supported", 30*time.Second)
}

// A Gateway without parameters of its own is deployed with its class's GatewayConfig,
// and a change there rolls out to it: replicas, the copied annotations, the Service
// type.
func TestClassParametersRollOut(t *testing.T) {
	ctx := t.Context()
	ns := env.NewNamespace(t, "classparams")
	controllerName := gatewayv1.GatewayController("consul-gateway-controller.github.io/" + ns)
	configs := env.ConfigClient.GatewayConfigs(ns)
	if _, err := configs.Create(ctx, &v1alpha1.GatewayConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "shared"},
		Spec:       v1alpha1.GatewayConfigSpec{Service: &v1alpha1.ServiceConfig{Type: new(corev1.ServiceTypeClusterIP)}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createClass(t, ns, controllerName, &gatewayv1.ParametersReference{
		Group: v1alpha1.GroupName, Kind: v1alpha1.GatewayConfigKind, Name: "shared", Namespace: new(gatewayv1.Namespace(ns)),
	})
	startController(t, ns, controllerName)
	gw, err := env.GatewayClient.GatewayV1().Gateways(ns).Create(ctx, &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: "plain", Annotations: map[string]string{"lb.example.com/scheme": "internal"}},
		Spec: gatewayv1.GatewaySpec{
			GatewayClassName: gatewayv1.ObjectName(ns),
			Listeners:        []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g := &gatewayCase{t: t, ns: ns, class: ns, name: dataplane.Name(gw)}
	testenv.Eventually(t, 60*time.Second, "a ClusterIP Service and one replica", func(ctx context.Context) error {
		svc, d, err := g.serviceAndDeployment(ctx)
		if err != nil {
			return err
		}
		if svc.Spec.Type != corev1.ServiceTypeClusterIP || *d.Spec.Replicas != 1 {
			return fmt.Errorf("Service %s, replicas %d", svc.Spec.Type, *d.Spec.Replicas)
		}
		return nil
	})

	shared, err := configs.Get(ctx, "shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	shared.Spec.Replicas = &v1alpha1.Replicas{Default: new(int32(2))}
	shared.Spec.Service = &v1alpha1.ServiceConfig{Type: new(corev1.ServiceTypeNodePort), CopyAnnotations: []string{"lb.example.com/scheme"}}
	if _, err := configs.Update(ctx, shared, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "the class's new parameters roll out", func(ctx context.Context) error {
		svc, d, err := g.serviceAndDeployment(ctx)
		if err != nil {
			return err
		}
		if svc.Spec.Type != corev1.ServiceTypeNodePort || svc.Annotations["lb.example.com/scheme"] != "internal" || *d.Spec.Replicas != 2 || d.Status.ReadyReplicas != 2 {
			return fmt.Errorf("Service %s %v, replicas %d (ready %d)", svc.Spec.Type, svc.Annotations, *d.Spec.Replicas, d.Status.ReadyReplicas)
		}
		return nil
	})
}
