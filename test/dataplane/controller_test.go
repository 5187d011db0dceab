package dataplane

import (
	"testing"
	"time"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// startController runs the controller binary for controllerName, without leader
// election and with args besides, until the test ends, when it must stop within 10 s
// of SIGTERM.
func startController(t *testing.T, name string, controllerName gatewayv1.GatewayController, args ...string) *testenv.Controller {
	t.Helper()
	c := env.RunController(t, testenv.ControllerOptions{
		Name: name,
		Args: append([]string{"--controller-name=" + string(controllerName), "--leader-elect=false", "-v=4"}, args...),
	})
	t.Cleanup(func() {
		if _, err := c.Terminate(10 * time.Second); err != nil {
			t.Errorf("stop controller: %v", err)
		}
	})
	return c
}

// createClass creates the GatewayClass name of controllerName with params, deleted
// when the test ends.
func createClass(t *testing.T, name string, controllerName gatewayv1.GatewayController, params *gatewayv1.ParametersReference) {
	t.Helper()
	class := testenv.GatewayClass(name, controllerName)
	class.Spec.ParametersRef = params
	env.Create(t, class)
}
