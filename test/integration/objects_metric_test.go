package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// TestObjectsByConditionMetric runs the controller binary on one Gateway with an
// HTTPRoute it accepts and one it refuses (a parentRef naming no listener), and reads
// consul_gateway_controller_objects from its /metrics: each route shows under its own
// condition, status and reason, the Gateway and its class as Accepted, and nothing
// is labelled with an object's name.
func TestObjectsByConditionMetric(t *testing.T) {
	s := env.NewGatewayStack(t, "objects-metric", "gw", 80, "echo")
	env.Create(t, s.Route("accepted"))
	refused := s.Route("refused")
	refused.Spec.ParentRefs[0].SectionName = new(gatewayv1.SectionName("no-such-listener"))
	env.Create(t, refused)
	p := env.RunController(t, testenv.ControllerOptions{Name: "objects-metric", Args: []string{
		"--controller-name=" + string(s.Controller), "--cluster-id=objects-metric", "--deploy-gateways=false", "--leader-elect=false",
	}})

	want := []struct {
		labels []string
		count  float64
	}{
		{[]string{`kind="HTTPRoute"`, `condition="Accepted"`, `status="True"`, `reason="Accepted"`}, 1},
		{[]string{`kind="HTTPRoute"`, `condition="Accepted"`, `status="False"`, `reason="NoMatchingParent"`}, 1},
		{[]string{`kind="Gateway"`, `condition="Accepted"`, `status="True"`, `reason="Accepted"`}, 1},
		{[]string{`kind="GatewayClass"`, `condition="Accepted"`, `status="True"`, `reason="Accepted"`}, 1},
	}
	var body string
	testenv.Eventually(t, 60*time.Second, "the objects gauge counts both routes", func(ctx context.Context) error {
		var err error
		if body, err = p.Metrics(ctx); err != nil {
			return err
		}
		for _, w := range want {
			if got := testenv.MetricSum(body, "consul_gateway_controller_objects", w.labels...); got != w.count {
				return fmt.Errorf("consul_gateway_controller_objects%v = %v, want %v", w.labels, got, w.count)
			}
		}
		return nil
	})
	if n := testenv.MetricSum(body, "consul_gateway_controller_objects", `name=`); n != 0 {
		t.Errorf("consul_gateway_controller_objects carries object names")
	}
}
