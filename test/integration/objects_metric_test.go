package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// TestListenerSetEvents: a ListenerSet its Gateway does not allow (no
// spec.allowedListeners) gets a Warning Event from this controller, as Gateways and
// routes do, and once the Gateway allows it, a Normal one.
func TestListenerSetEvents(t *testing.T) {
	s := env.NewGatewayStack(t, "listenerset-events", "gw", 80, "echo")
	env.Create(t, testenv.ListenerSet(s.Namespace, "extra", gatewayv1.ParentGatewayReference{Name: "gw"},
		gatewayv1.ListenerEntry{Name: "alt", Port: 8080, Protocol: gatewayv1.HTTPProtocolType}))
	env.RunController(t, testenv.ControllerOptions{Name: "listenerset-events", Args: []string{
		"--controller-name=" + string(s.Controller), "--cluster-id=listenerset-events", "--deploy-gateways=false", "--leader-elect=false",
	}})
	waitListenerSetEvent(t, s, corev1.EventTypeWarning, string(gatewayv1.ListenerSetReasonNotAllowed))

	gateways := env.GatewayClient.GatewayV1().Gateways(s.Namespace)
	testenv.Update(t, gateways.Get, gateways.Update, "gw", func(gw *gatewayv1.Gateway) {
		gw.Spec.AllowedListeners = &gatewayv1.AllowedListeners{Namespaces: &gatewayv1.ListenerNamespaces{From: new(gatewayv1.NamespacesFromSame)}}
	})
	waitListenerSetEvent(t, s, corev1.EventTypeNormal, string(gatewayv1.ListenerSetReasonAccepted))
}

// waitListenerSetEvent waits for an Event of eventType and reason on the ListenerSet
// "extra", reported by the stack's controller.
func waitListenerSetEvent(t *testing.T, s testenv.Stack, eventType, reason string) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, eventType+" "+reason+" Event on the ListenerSet", func(ctx context.Context) error {
		list, err := env.KubeClient.EventsV1().Events(s.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Kind != "ListenerSet" || e.Regarding.Name != "extra" {
				continue
			}
			seen = append(seen, e.Type+"/"+e.Reason+": "+e.Note)
			if e.Type == eventType && e.Reason == reason && e.Action == "Accept" && e.ReportingController == string(s.Controller) {
				return nil
			}
		}
		return fmt.Errorf("ListenerSet Events %q", seen)
	})
}
