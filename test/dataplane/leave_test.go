package dataplane

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// A Gateway moved to another controller's class loses the ServiceAccount, Deployment,
// Service and PodDisruptionBudget this controller deployed for it, also when it moved
// while the controller was down; one moved back gets them again. A Deployment of the same Gateway labelled
// with the other controller's class (what another instance of this controller,
// sharing its managed-by label, would have deployed) is left alone.
func TestGatewayLeavingOurClass(t *testing.T) {
	ctx := t.Context()
	g := newGatewayCase(t, "leave", corev1.ServiceTypeClusterIP)
	other := g.ns + "-other"
	createClass(t, other, gatewayv1.GatewayController("example.com/"+other), nil)
	g.condition("Accepted", "True/Accepted", 60*time.Second)
	g.waitObjects(true)
	theirs := g.createOtherClassDeployment(other)

	updateGateway(t, g, func(gw *gatewayv1.Gateway) { gw.Spec.GatewayClassName = gatewayv1.ObjectName(other) })
	g.waitObjects(false)
	g.checkLeftAlone(theirs)

	updateGateway(t, g, func(gw *gatewayv1.Gateway) { gw.Spec.GatewayClassName = gatewayv1.ObjectName(g.class) })
	g.waitObjects(true)

	// Moved while the controller is down: the restarted one finds the objects in its
	// initial list and deletes them.
	if _, err := g.controller.Terminate(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	updateGateway(t, g, func(gw *gatewayv1.Gateway) { gw.Spec.GatewayClassName = gatewayv1.ObjectName(other) })
	g.controller = startController(t, g.ns+"-restarted", gatewayv1.GatewayController("consul-gateway-controller.github.io/"+g.ns))
	g.waitObjects(false)
	g.checkLeftAlone(theirs)
	text, err := g.controller.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := testenv.MetricSum(text, "consul_gateway_controller_gateway_object_deletions_total"); got != 4 {
		t.Errorf("the restarted controller counted %v deletions, want 4", got)
	}
}

// waitObjects waits until the Gateway's ServiceAccount, Deployment, Service and
// PodDisruptionBudget all exist (or are all gone).
func (g *gatewayCase) waitObjects(exist bool) {
	g.t.Helper()
	what := "the Gateway's objects are gone"
	if exist {
		what = "the Gateway's objects exist"
	}
	testenv.Eventually(g.t, 60*time.Second, what, func(context.Context) error {
		// Not the poll's context: at its deadline the Gets would fail with it, and the
		// failure would say nothing of the objects.
		ctx, core := g.t.Context(), env.KubeClient.CoreV1()
		for kind, get := range map[string]func() error{
			"ServiceAccount": func() error { _, err := core.ServiceAccounts(g.ns).Get(ctx, g.name, metav1.GetOptions{}); return err },
			"Deployment":     func() error { _, err := g.deployment(ctx); return err },
			"Service":        func() error { _, err := g.service(ctx); return err },
			"PodDisruptionBudget": func() error {
				_, err := env.KubeClient.PolicyV1().PodDisruptionBudgets(g.ns).Get(ctx, g.name, metav1.GetOptions{})
				return err
			},
		} {
			err := get()
			switch {
			case exist && err != nil:
				return fmt.Errorf("%s %s: %w", kind, g.name, err)
			case !exist && err == nil:
				return fmt.Errorf("%s %s of Gateway edge, which is not ours, still exists", kind, g.name)
			case !exist && !apierrors.IsNotFound(err):
				return err
			}
		}
		return nil
	})
}

// createOtherClassDeployment creates the Deployment another instance of this
// controller, serving class, would have made for the Gateway: controlled by it, with
// the same managed-by label, without pods of its own.
func (g *gatewayCase) createOtherClassDeployment(class string) *appsv1.Deployment {
	g.t.Helper()
	gw, err := g.gateway(g.t.Context())
	if err != nil {
		g.t.Fatal(err)
	}
	pods := map[string]string{"app": "other-implementation"}
	d, err := env.KubeClient.AppsV1().Deployments(g.ns).Create(g.t.Context(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: "edge-" + class,
			Labels: map[string]string{dataplane.GatewayNameLabel: gw.Name, dataplane.GatewayClassLabel: class,
				dataplane.ManagedByLabel: dataplane.ManagedByValue},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: gatewayv1.GroupVersion.String(), Kind: "Gateway",
				Name: gw.Name, UID: gw.UID, Controller: new(true)}},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: pods},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: pods},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c:1"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		g.t.Fatal(err)
	}
	return d
}

// checkLeftAlone fails unless d is still there, the very object created.
func (g *gatewayCase) checkLeftAlone(d *appsv1.Deployment) {
	g.t.Helper()
	got, err := env.KubeClient.AppsV1().Deployments(g.ns).Get(g.t.Context(), d.Name, metav1.GetOptions{})
	if err != nil {
		g.t.Fatalf("the other class's Deployment %s: %v", d.Name, err)
	}
	if got.UID != d.UID {
		g.t.Fatalf("the other class's Deployment %s was replaced", d.Name)
	}
}
