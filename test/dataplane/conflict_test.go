package dataplane

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// TestConflictDeploysNothing: another team's ServiceAccount holds the name of a new
// Gateway's. Nothing is deployed for the Gateway (no Deployment, Service or pods, so
// nothing in Consul's catalog) and Programmed names the ServiceAccount; once it is
// deleted, the Gateway is deployed and its pods registered. Before, the Deployment
// was applied and its pods ran as the foreign ServiceAccount.
func TestConflictDeploysNothing(t *testing.T) {
	ns := env.NewNamespace(t, "conflict")
	controllerName := gatewayv1.GatewayController("consul-gateway-controller.github.io/" + ns)
	createClass(t, ns, controllerName, nil)
	startController(t, ns, controllerName)

	gw := testenv.Gateway(ns, "edge", ns, testenv.HTTPListener("http", 80))
	name := dataplane.Name(gw)
	env.Create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	env.Create(t, gw)

	want := fmt.Sprintf("ServiceAccount %s/%s exists and is not controlled by Gateway edge", ns, name)
	testenv.Eventually(t, 60*time.Second, "Programmed names the foreign ServiceAccount", func(ctx context.Context) error {
		text, err := programmedText(ctx, ns, "edge")
		if err != nil {
			return err
		}
		if !strings.Contains(text, want) {
			return fmt.Errorf("Programmed = %s, want it to say %q", text, want)
		}
		return nil
	})
	ctx := t.Context()
	if d, err := env.KubeClient.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment %s/%s beside a foreign ServiceAccount: %v (%v), want none", ns, name, d.GetUID(), err)
	}
	if s, err := env.KubeClient.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Service %s/%s beside a foreign ServiceAccount: %v (%v), want none", ns, name, s.GetUID(), err)
	}
	service := translate.Naming{}.EntryName(ns, "edge")
	if instances, _, err := env.ConsulClient.Catalog().Service(service, "", nil); err != nil || len(instances) != 0 {
		t.Errorf("catalog instances of %s beside a foreign ServiceAccount: %d (%v), want none", service, len(instances), err)
	}
	if sa, err := env.KubeClient.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{}); err != nil || len(sa.OwnerReferences) != 0 || len(sa.Labels) != 0 {
		t.Errorf("the foreign ServiceAccount: %+v (%v), want it untouched", sa, err)
	}

	// The conflict removed, everything is deployed and the pod registered.
	if err := env.KubeClient.CoreV1().ServiceAccounts(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 90*time.Second, "the Gateway deployed and its pod registered", func(ctx context.Context) error {
		text, err := programmedText(ctx, ns, "edge")
		if err != nil {
			return err
		}
		// No load balancer assigns the Service an address here: Programmed stays
		// False, for that reason only.
		if strings.Contains(text, "not controlled by") {
			return fmt.Errorf("Programmed = %s", text)
		}
		if _, err := env.KubeClient.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		if _, err := env.KubeClient.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		entries, _, err := env.ConsulClient.Health().Service(service, "", true, (&consulapi.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return err
		}
		if len(entries) == 0 {
			return fmt.Errorf("no passing instance of %s", service)
		}
		return nil
	})
}
