package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// Consul can accept a route and still refuse to bind it to one of its parents. Here the
// api-gateway entry name of the second Gateway, "other", is held by a foreign entry
// whose listener of the same name is a tcp listener: Consul binds the route to "edge"
// and refuses it on "other". Each parent's ConsulAccepted says what Consul said about
// that parent.
func TestConsulBindingPerParent(t *testing.T) {
	s := newConsulStack(t, "cs-bind")
	otherEntry, routeEntry := s.naming.EntryName(s.Namespace, "other"), s.naming.EntryName(s.Namespace, "web")
	foreign := &consulapi.APIGatewayConfigEntry{Kind: consulapi.APIGateway, Name: otherEntry,
		Listeners: []consulapi.APIGatewayListener{{Name: "http", Port: 18091, Protocol: "tcp"}}}
	if _, _, err := env.ConsulClient.ConfigEntries().Set(consul.Compact(foreign), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = env.ConsulClient.ConfigEntries().Delete(consulapi.APIGateway, otherEntry, nil) })
	env.Create(t, s.Gateway("other", testenv.HTTPListener("http", 18081)))

	startController(t, s.Controller, controllerOptions{consul: &consulOptions{clusterID: "it", translation: translate.Options{ManageServiceDefaults: true}}})
	// Every status the route is given, to check that the parent Consul binds never
	// showed a refusal on the way (Consul 1.15 refuses each new route once before it
	// binds it).
	routeEvents, err := env.GatewayClient.GatewayV1().HTTPRoutes(s.Namespace).Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer routeEvents.Stop()
	route := s.Route("web")
	route.Spec.ParentRefs = append(route.Spec.ParentRefs, gatewayv1.ParentReference{Name: "other"})
	env.Create(t, route)

	var parents map[string]metav1.Condition
	testenv.Eventually(t, 30*time.Second, "Consul's binding verdicts reach each parent", func(context.Context) error {
		var err error
		parents, err = s.consulAcceptedByParent(t, "web")
		if err != nil {
			return err
		}
		if parents["edge"].Status != metav1.ConditionTrue || parents["other"].Reason != string(consulapi.RouteReasonFailedToBind) {
			return fmt.Errorf("ConsulAccepted by parent: %+v", parents)
		}
		return nil
	})
	if got := parents["edge"]; got.Reason != "Accepted" {
		t.Errorf("parent edge: %s = %s/%s (%s), want True/Accepted", gwsync.ConsulAcceptedCondition, got.Status, got.Reason, got.Message)
	}
	other := parents["other"]
	if other.Status != metav1.ConditionFalse || !strings.Contains(other.Message, "listener http is not a http listener") {
		t.Errorf("parent other: %s = %s/%s (%s), want False with Consul's message", gwsync.ConsulAcceptedCondition, other.Status, other.Reason, other.Message)
	}
	for _, c := range s.entry(t, consulapi.HTTPRoute, routeEntry).(*consulapi.HTTPRouteConfigEntry).Status.Conditions {
		t.Logf("Consul's condition on http-route %s: %s=%s %s %q resource=%+v", routeEntry, c.Type, c.Status, c.Reason, c.Message, c.Resource)
	}
	t.Logf("parent other: %s=%s %s %q", gwsync.ConsulAcceptedCondition, other.Status, other.Reason, other.Message)

	for _, c := range s.edgeConditionsSeen(routeEvents.ResultChan()) {
		t.Logf("parent edge went through %s=%s %s %q", gwsync.ConsulAcceptedCondition, c.Status, c.Reason, c.Message)
		if c.Status == metav1.ConditionFalse && c.Reason != "Pending" {
			t.Errorf("parent edge showed %s=%s/%s (%s) on the way to True", gwsync.ConsulAcceptedCondition, c.Status, c.Reason, c.Message)
		}
	}

	// The foreign entry is left as its owner wrote it.
	got, ok := s.entry(t, consulapi.APIGateway, otherEntry).(*consulapi.APIGatewayConfigEntry)
	if !ok || len(got.Meta) != 0 || len(got.Listeners) != 1 || got.Listeners[0].Protocol != "tcp" {
		t.Errorf("the foreign api-gateway entry was changed: %+v", got)
	}
}

// consulAcceptedByParent reads our ConsulAccepted condition on each parent of ours of
// a route, by the parent's name.
func (s consulStack) consulAcceptedByParent(t *testing.T, route string) (map[string]metav1.Condition, error) {
	t.Helper()
	r, err := env.GatewayClient.GatewayV1().HTTPRoutes(s.Namespace).Get(t.Context(), route, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]metav1.Condition{}
	for _, p := range r.Status.Parents {
		if p.ControllerName != s.Controller {
			continue
		}
		if c := meta.FindStatusCondition(p.Conditions, gwsync.ConsulAcceptedCondition); c != nil {
			out[string(p.ParentRef.Name)] = *c
		}
	}
	return out, nil
}

// edgeConditionsSeen drains the route events delivered so far and returns the
// ConsulAccepted condition of the parent "edge" in each.
func (s consulStack) edgeConditionsSeen(events <-chan watch.Event) []metav1.Condition {
	var seen []metav1.Condition
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return seen
			}
			r, isRoute := ev.Object.(*gatewayv1.HTTPRoute)
			if !isRoute {
				continue
			}
			for _, p := range r.Status.Parents {
				if p.ControllerName != s.Controller || p.ParentRef.Name != "edge" {
					continue
				}
				if c := meta.FindStatusCondition(p.Conditions, gwsync.ConsulAcceptedCondition); c != nil {
					seen = append(seen, *c)
				}
			}
		case <-time.After(time.Second):
			return seen
		}
	}
}
