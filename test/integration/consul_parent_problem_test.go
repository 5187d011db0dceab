package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// A translation problem of one parent refuses that parent only. The route's hostname
// "*.example.com" reaches the listener of "edge", which has no hostname, as the
// wildcard itself, and Consul 1.15 takes no wildcard on an http-route: the route is
// left out of "edge". On "named", whose listener is "a.example.com", it is written
// with that hostname and served. "named" says ConsulAccepted=True, "edge" False with
// the problem.
func TestConsulParentProblemPerParent(t *testing.T) {
	s := newConsulStack(t, "cs-parentproblem")
	named := testenv.HTTPListener("http", 18082)
	named.Hostname = new(gatewayv1.Hostname("a.example.com"))
	env.Create(t, s.Gateway("named", named))

	startController(t, s.Controller, controllerOptions{consul: &consulOptions{clusterID: "it", translation: translate.Options{ManageServiceDefaults: true}}})
	route := s.Route("web", "*.example.com")
	route.Spec.ParentRefs = append(route.Spec.ParentRefs, gatewayv1.ParentReference{Name: "named"})
	env.Create(t, route)

	var parents map[string]metav1.Condition
	testenv.Eventually(t, 30*time.Second, "each parent's ConsulAccepted", func(context.Context) error {
		var err error
		parents, err = s.consulAcceptedByParent(t, "web")
		if err != nil {
			return err
		}
		if parents["named"].Status != metav1.ConditionTrue || parents["edge"].Reason != consul.ReasonTranslation {
			return fmt.Errorf("ConsulAccepted by parent: %+v", parents)
		}
		return nil
	})
	if got := parents["named"]; got.Reason != "Accepted" {
		t.Errorf("parent named: %s = %s/%s (%s), want True/Accepted", gwsync.ConsulAcceptedCondition, got.Status, got.Reason, got.Message)
	}
	edge := parents["edge"]
	if edge.Status != metav1.ConditionFalse || !strings.Contains(edge.Message, "listener "+s.Namespace+"/edge/http") {
		t.Errorf("parent edge: %s = %s/%s (%s), want False naming its listener", gwsync.ConsulAcceptedCondition, edge.Status, edge.Reason, edge.Message)
	}
	if strings.Contains(edge.Message, "/named/") {
		t.Errorf("parent edge's message names the other parent: %s", edge.Message)
	}
	t.Logf("parent edge: %s=%s %s %q", gwsync.ConsulAcceptedCondition, edge.Status, edge.Reason, edge.Message)
}
