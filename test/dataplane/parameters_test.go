package dataplane

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// A parametersRef that names no usable GatewayConfig (missing, of another kind, or with
// a value the schema lets through but the controller refuses) makes the class or the
// Gateway Accepted=False/InvalidParameters with a message naming the problem; fixing
// the GatewayConfig alone brings Accepted back.
func TestInvalidParameters(t *testing.T) {
	ctx := t.Context()
	ns := env.NewNamespace(t, "params")
	controllerName := gatewayv1.GatewayController("consul-gateway-controller.github.io/params-test")
	startController(t, "params", controllerName)
	configs := env.ConfigClient.GatewayConfigs(ns)
	classes := env.GatewayClient.GatewayV1().GatewayClasses()
	gateways := env.GatewayClient.GatewayV1().Gateways(ns)

	createClass(t, ns, controllerName, &gatewayv1.ParametersReference{
		Group: v1alpha1.GroupName, Kind: v1alpha1.GatewayConfigKind, Name: "shared", Namespace: new(gatewayv1.Namespace(ns)),
	})
	classAccepted := func(want string) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, "class Accepted "+want, func(ctx context.Context) error {
			class, err := classes.Get(ctx, ns, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got := testenv.ConditionText(class.Status.Conditions, "Accepted"); !strings.HasPrefix(got, want) {
				return fmt.Errorf("Accepted %q", got)
			}
			return nil
		})
	}
	classAccepted("False/InvalidParameters: GatewayConfig " + ns + "/shared does not exist")

	// Requests above limits pass the schema; the controller refuses them.
	shared := &v1alpha1.GatewayConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"},
		Spec: v1alpha1.GatewayConfigSpec{Resources: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
		}},
	}
	created, err := configs.Create(ctx, shared, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	classAccepted("False/InvalidParameters: GatewayConfig " + ns + "/shared is invalid: spec.resources.requests.memory 1Gi exceeds its limit 128Mi")

	created.Spec.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("2Gi")
	if _, err := configs.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	classAccepted("True/Accepted")

	gateway := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "own"},
		Spec: gatewayv1.GatewaySpec{
			GatewayClassName: gatewayv1.ObjectName(ns),
			Listeners:        []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}},
			Infrastructure: &gatewayv1.GatewayInfrastructure{ParametersRef: &gatewayv1.LocalParametersReference{
				Group: "", Kind: "ConfigMap", Name: "settings",
			}},
		},
	}
	if _, err := gateways.Create(ctx, gateway, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gatewayAccepted := func(want string) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, "Gateway Accepted "+want, func(ctx context.Context) error {
			gw, err := gateways.Get(ctx, "own", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got := testenv.ConditionText(gw.Status.Conditions, "Accepted"); !strings.HasPrefix(got, want) {
				return fmt.Errorf("Accepted %q", got)
			}
			return nil
		})
	}
	gatewayAccepted(`False/InvalidParameters: spec.infrastructure.parametersRef: parametersRef names ConfigMap settings of group ""`)

	// The Gateway's own reference to a GatewayConfig that does not exist yet, then does.
	// The controller writes the Gateway's status meanwhile: retry on a conflict.
	testenv.Update(t, gateways.Get, gateways.Update, "own", func(gw *gatewayv1.Gateway) {
		gw.Spec.Infrastructure.ParametersRef = &gatewayv1.LocalParametersReference{Group: v1alpha1.GroupName, Kind: v1alpha1.GatewayConfigKind, Name: "own"}
	})
	gatewayAccepted("False/InvalidParameters: spec.infrastructure.parametersRef: GatewayConfig " + ns + "/own does not exist")
	if _, err := configs.Create(ctx, &v1alpha1.GatewayConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "own"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gatewayAccepted("True/Accepted")
}
