package dataplane

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// TestExistingObjectsAreNotTakenOver: another team's Service and ServiceAccount, named
// as a new Gateway's objects are, without this controller's label (so not in its
// caches). The controller must not write them: the Gateway says which object is in the
// way, the Service keeps its selector and ports and gets no owner, and deleting the
// Gateway leaves both.
func TestExistingObjectsAreNotTakenOver(t *testing.T) {
	ctx := t.Context()
	ns := env.NewNamespace(t, "takeover")
	controllerName := gatewayv1.GatewayController("consul-gateway-controller.github.io/" + ns)
	createClass(t, ns, controllerName, nil)
	startController(t, ns, controllerName)

	gw := testenv.Gateway(ns, "victim", ns, testenv.HTTPListener("http", 8080))
	name := dataplane.Name(gw)
	selector := map[string]string{"app": "payments"}
	env.Create(t, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Selector: selector, Ports: []corev1.ServicePort{{Name: "payments", Port: 9000, Protocol: corev1.ProtocolTCP}}},
	})
	env.Create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	env.Create(t, gw)

	testenv.Eventually(t, 60*time.Second, "the Gateway names the object in its way", func(ctx context.Context) error {
		got, err := env.GatewayClient.GatewayV1().Gateways(ns).Get(ctx, "victim", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if text := testenv.ConditionText(got.Status.Conditions, "Programmed"); !strings.Contains(text, "exists and is not controlled by Gateway victim") {
			return fmt.Errorf("Programmed = %s", text)
		}
		return nil
	})
	untouched := func(when string) {
		t.Helper()
		svc, err := env.KubeClient.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: the team's Service: %v", when, err)
		}
		if !maps.Equal(svc.Spec.Selector, selector) || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 9000 || len(svc.OwnerReferences) != 0 {
			t.Errorf("%s: the team's Service was written: selector %v, ports %v, owners %v", when, svc.Spec.Selector, svc.Spec.Ports, svc.OwnerReferences)
		}
		sa, err := env.KubeClient.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: the team's ServiceAccount: %v", when, err)
		}
		if len(sa.OwnerReferences) != 0 || sa.Labels[dataplane.ManagedByLabel] != "" {
			t.Errorf("%s: the team's ServiceAccount was written: owners %v, labels %v", when, sa.OwnerReferences, sa.Labels)
		}
	}
	untouched("with the Gateway")

	if err := env.GatewayClient.GatewayV1().Gateways(ns).Delete(ctx, "victim", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The Gateway's own Deployment goes by garbage collection; once it is gone, so
	// would anything else the Gateway owned.
	testenv.Eventually(t, 60*time.Second, "the Gateway's Deployment collected", func(ctx context.Context) error {
		_, err := env.KubeClient.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		return errors.New("still there")
	})
	untouched("after the Gateway was deleted")
}
