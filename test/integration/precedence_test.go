package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// TestRoutedAsSpecifiedFollowsTheOtherRoutes: a route's RoutedAsSpecified condition
// depends on the other routes of its listener, so it follows them as they come,
// change and go, though the route itself never changes.
func TestRoutedAsSpecifiedFollowsTheOtherRoutes(t *testing.T) {
	const prefix = "routed"
	startController(t, testenv.StackController(prefix), controllerOptions{})
	s := env.NewGatewayStack(t, prefix, "gw", 80, "echo")
	routes := env.GatewayClient.GatewayV1().HTTPRoutes(s.Namespace)
	other := "HTTPRoute " + s.Namespace + "/b"

	// a, alone, is routed as the spec says.
	env.Create(t, s.Route("a"))
	awaitRoutedText(t, s, "a", "True/RoutedAsSpecified")

	// b catches every request too: the spec gives them to a (older, or first by
	// name), Consul to whichever route it bound first.
	env.Create(t, s.Route("b"))
	awaitRoutedText(t, s, "a", "False/TieOrderedByConsul", other, "GET any-host.example/")
	awaitRoutedText(t, s, "b", "True/RoutedAsSpecified")

	// b now names b.example.com and serves /only: Consul matches b.example.com
	// against b alone, and a's requests there get 404.
	testenv.Update(t, routes.Get, routes.Update, "b", func(r *gatewayv1.HTTPRoute) {
		r.Spec.Hostnames = []gatewayv1.Hostname{"b.example.com"}
		r.Spec.Rules[0].Matches = []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Value: new("/only")}}}
	})
	awaitRoutedText(t, s, "a", "False/HiddenByHostname", other, "GET b.example.com/", "404")

	// b goes: a keeps no condition naming it.
	if err := routes.Delete(t.Context(), "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	awaitRoutedText(t, s, "a", "True/RoutedAsSpecified")
}

// TestTCPListenerServesOnlyItsOldestRoute: two TCPRoutes on one TCP listener are both
// accepted; the older is served and routed as specified, the newer says which route
// the listener serves (Consul 1.15 serves no listener with two tcp-routes); once the
// older is deleted, the newer is served.
func TestTCPListenerServesOnlyItsOldestRoute(t *testing.T) {
	const prefix = "routed-tcp"
	startController(t, testenv.StackController(prefix), controllerOptions{})
	s := env.NewStack(t, prefix)
	env.Create(t, testenv.Service(s.Namespace, "db", testenv.BackendPort))
	tcp := gatewayv1.Listener{Name: "tcp", Port: 5432, Protocol: gatewayv1.TCPProtocolType}
	env.Create(t, s.Gateway("gw", tcp))
	parents := []gatewayv1.ParentReference{{Name: "gw"}}
	routes := env.GatewayClient.GatewayV1().TCPRoutes(s.Namespace)

	// Created one after the other, or in the same second and then ordered by name: a
	// is the older.
	env.Create(t, testenv.TCPRoute(s.Namespace, "a", parents, testenv.Backend("db", testenv.BackendPort)))
	env.Create(t, testenv.TCPRoute(s.Namespace, "b", parents, testenv.Backend("db", testenv.BackendPort)))
	condition := func(route, conditionType, statusReason string, mentions ...string) {
		t.Helper()
		awaitParentCondition(t, conditionType, statusReason, mentions, func(ctx context.Context) ([]gatewayv1.RouteParentStatus, error) {
			r, err := routes.Get(ctx, route, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return r.Status.Parents, nil
		}, s.Controller, "TCPRoute "+route)
	}
	condition("a", gwsync.RoutedAsSpecifiedCondition, "True/RoutedAsSpecified")
	condition("b", gwsync.ConsulAcceptedCondition, "False/"+gwsync.ReasonOlderRouteServed, "listener tcp serves TCPRoute "+s.Namespace+"/a")
	condition("b", "Accepted", "True/Accepted")

	if err := routes.Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	condition("b", gwsync.RoutedAsSpecifiedCondition, "True/RoutedAsSpecified")
}

// awaitRoutedText waits until the HTTPRoute's RoutedAsSpecified condition on the
// stack's Gateway is statusReason and mentions each of mentions.
func awaitRoutedText(t *testing.T, s testenv.Stack, route, statusReason string, mentions ...string) {
	t.Helper()
	awaitParentCondition(t, gwsync.RoutedAsSpecifiedCondition, statusReason, mentions, func(ctx context.Context) ([]gatewayv1.RouteParentStatus, error) {
		r, err := env.GatewayClient.GatewayV1().HTTPRoutes(s.Namespace).Get(ctx, route, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return r.Status.Parents, nil
	}, s.Controller, "HTTPRoute "+route)
}

// awaitParentCondition waits until the condition of type conditionType of
// controller's parent among those parents returns is "Status/Reason" statusReason and
// mentions each of mentions.
func awaitParentCondition(t *testing.T, conditionType, statusReason string, mentions []string, parents func(context.Context) ([]gatewayv1.RouteParentStatus, error),
	controller gatewayv1.GatewayController, what string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, what+" "+conditionType+" "+statusReason, func(ctx context.Context) error {
		ps, err := parents(ctx)
		if err != nil {
			return err
		}
		p := testenv.ParentOf(ps, controller)
		if p == nil {
			return fmt.Errorf("no parent of ours")
		}
		text := testenv.ConditionText(p.Conditions, conditionType)
		if !strings.HasPrefix(text, statusReason+":") {
			return fmt.Errorf("%s is %s, want %s", conditionType, text, statusReason)
		}
		for _, m := range mentions {
			if !strings.Contains(text, m) {
				return fmt.Errorf("%s is %s, which does not mention %q", conditionType, text, m)
			}
		}
		return nil
	})
}
