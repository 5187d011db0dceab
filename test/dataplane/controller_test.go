package dataplane

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/client"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// startController runs the controller binary for controllerName, without leader
// election, until the test ends.
func startController(t *testing.T, name string, controllerName gatewayv1.GatewayController) *testenv.Controller {
	t.Helper()
	c, err := env.StartController(testenv.ControllerOptions{
		Binary: testenv.ControllerBinary(t),
		Name:   name,
		Args:   []string{"--controller-name=" + string(controllerName), "--leader-elect=false", "-v=4"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := c.Terminate(10 * time.Second); err != nil {
			t.Errorf("stop controller: %v", err)
		}
		t.Logf("controller log: %s", c.LogPath())
	})
	return c
}

func configClient(t *testing.T) client.Interface {
	t.Helper()
	c, err := client.NewForConfig(env.Kube.Config(testenv.AdminUser))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// acceptedOf returns "Status/Reason: message" of the Accepted condition.
func acceptedOf(conds []metav1.Condition) string {
	for _, c := range conds {
		if c.Type == "Accepted" {
			return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
		}
	}
	return "none"
}

func createClass(t *testing.T, name string, controllerName gatewayv1.GatewayController, params *gatewayv1.ParametersReference) {
	t.Helper()
	classes := env.GatewayClient.GatewayV1().GatewayClasses()
	_, err := classes.Create(t.Context(), &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: controllerName, ParametersRef: params},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = classes.Delete(context.Background(), name, metav1.DeleteOptions{}) })
}
