package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// TestStaleCacheConflictConvergesOnNewestSpec delays the controller's HTTPRoute watch
// so its cache lags the server, edits a route, and at once changes its Gateway so the
// route's status must change: the controller writes from the stale cache, gets 409,
// and converges on the newest spec; its confirmations never go back to the old one.
func TestStaleCacheConflictConvergesOnNewestSpec(t *testing.T) {
	const prefix = "stale"
	rc := startController(t, testenv.StackController(prefix), controllerOptions{watchDelay: 1500 * time.Millisecond, delayResources: []string{"httproutes"}, delayNamespace: prefix})
	s := env.NewGatewayStack(t, prefix, "gw", 80, "echo")
	env.Create(t, s.Route("r"))
	controller, ns := s.Controller, s.Namespace
	routes := env.GatewayClient.GatewayV1().HTTPRoutes(ns)
	key := cache.ObjectName{Namespace: ns, Name: "r"}

	testenv.Eventually(t, 30*time.Second, "route accepted", func(ctx context.Context) error {
		r, err := routes.Get(ctx, "r", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := ourParents(r.Status.Parents, controller); len(got) != 1 || got[0].Accepted != "True/Accepted" {
			return fmt.Errorf("parents of ours %+v", got)
		}
		return nil
	})

	// Edit the route (generation 2), then at once shut the listener to other
	// namespaces' routes... of its own namespace: Selector matching nothing.
	r, err := routes.Get(t.Context(), "r", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.Spec.Hostnames = []gatewayv1.Hostname{"new.example.com"}
	r, err = routes.Update(t.Context(), r, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	newGeneration := r.Generation
	gateways := env.GatewayClient.GatewayV1().Gateways(ns)
	testenv.Update(t, gateways.Get, gateways.Update, "gw", func(g *gatewayv1.Gateway) {
		g.Spec.Listeners[0].AllowedRoutes = &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{
			From: new(gatewayv1.NamespacesFromSelector), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"no": "match"}},
		}}
	})

	testenv.Eventually(t, 30*time.Second, "route status reflects the newest spec", func(ctx context.Context) error {
		r, err := routes.Get(ctx, "r", metav1.GetOptions{})
		if err != nil {
			return err
		}
		p := testenv.ParentOf(r.Status.Parents, controller)
		if p == nil {
			return errors.New("no parent of ours")
		}
		c := p.Conditions[0]
		if c.Type == "Accepted" && c.Reason == string(gatewayv1.RouteReasonNotAllowedByListeners) && c.ObservedGeneration == newGeneration {
			return nil
		}
		return fmt.Errorf("%s=%s (%s) at generation %d of %d: %s", c.Type, c.Status, c.Reason, c.ObservedGeneration, newGeneration, c.Message)
	})
	if n := rc.statusWrites.count(http.StatusConflict); n == 0 {
		t.Error("the controller never got 409: the stale-cache path was not exercised")
	} else {
		t.Logf("status writes answered 409: %d", n)
	}
	// The controller publishes a write's result once the response reaches it, which
	// can be after this test read the new status from the server.
	testenv.Eventually(t, 10*time.Second, "the newest generation confirmed", func(context.Context) error {
		confirmed := rc.published.of("HTTPRoute", key)
		if len(confirmed) == 0 || confirmed[len(confirmed)-1].Object == nil {
			return errors.New("the last confirmation is not of the route")
		}
		if gen := confirmed[len(confirmed)-1].Object.(*gatewayv1.HTTPRoute).Generation; gen != newGeneration {
			return fmt.Errorf("last confirmed generation = %d, want %d", gen, newGeneration)
		}
		return nil
	})
	// Confirmations of the route must never go back to an older generation.
	var last int64
	for _, c := range rc.published.of("HTTPRoute", key) {
		if c.Object == nil {
			continue
		}
		gen := c.Object.(*gatewayv1.HTTPRoute).Generation
		if gen < last {
			t.Errorf("confirmed generation %d after %d: a stale spec was confirmed after the newer one", gen, last)
		}
		last = gen
	}
}

// TestOtherControllersRouteStatusSurvives writes a status entry for another
// controller's Gateway into a route and checks that every write of ours keeps it.
func TestOtherControllersRouteStatusSurvives(t *testing.T) {
	const prefix = "shared"
	rc := startController(t, testenv.StackController(prefix), controllerOptions{})
	s := env.NewGatewayStack(t, prefix, "ours", 80, "echo")
	controller, ns := s.Controller, s.Namespace
	env.Create(t, testenv.GatewayClass(prefix+"-other", "other.example.com/controller"))
	env.Create(t, testenv.Gateway(ns, "theirs", prefix+"-other", testenv.HTTPListener("http", 80)))
	route := s.Route("r")
	route.Spec.ParentRefs = append(route.Spec.ParentRefs, gatewayv1.ParentReference{Name: "theirs"})
	env.Create(t, route)
	routes := env.GatewayClient.GatewayV1().HTTPRoutes(ns)

	theirs := gatewayv1.RouteParentStatus{
		ParentRef:      gatewayv1.ParentReference{Name: "theirs"},
		ControllerName: "other.example.com/controller",
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", Message: "written by the other controller",
			ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))}},
	}
	// The baseline is the entry as the server stored it (with the CRD's defaults).
	stored := testenv.Update(t, routes.Get, routes.UpdateStatus, "r", func(r *gatewayv1.HTTPRoute) {
		r.Status.Parents = append(r.Status.Parents, theirs)
	})
	for _, p := range stored.Status.Parents {
		if p.ControllerName == theirs.ControllerName {
			theirs = p
		}
	}

	// Each edit makes our controller write the route's status again.
	for i, host := range []string{"", "a.example.com", "b.example.com"} {
		if host != "" {
			setHostnames(t, ns, "r", gatewayv1.Hostname(host))
		}

		var got *gatewayv1.HTTPRoute
		testenv.Eventually(t, 30*time.Second, "our status for the latest generation", func(ctx context.Context) error {
			r, err := routes.Get(ctx, "r", metav1.GetOptions{})
			if err != nil {
				return err
			}
			got = r
			for _, p := range r.Status.Parents {
				if p.ControllerName == controller && p.Conditions[0].ObservedGeneration == r.Generation {
					return nil
				}
			}
			return fmt.Errorf("no status of ours at generation %d", r.Generation)
		})
		found := false
		for _, p := range got.Status.Parents {
			if p.ControllerName == theirs.ControllerName {
				found = true
				if !apiequality.Semantic.DeepEqual(p, theirs) {
					t.Errorf("step %d: the other controller's entry changed:\n%s", i, cmp.Diff(theirs, p))
				}
			}
		}
		if !found {
			t.Errorf("step %d: the other controller's entry is gone: %+v", i, got.Status.Parents)
		}
	}
	// A write is counted when its response reaches the controller, which can be after
	// this test saw the status on the server.
	testenv.Eventually(t, 10*time.Second, "one successful status write per generation at least", func(context.Context) error {
		if n := rc.statusWrites.count(http.StatusOK); n < 3 {
			return fmt.Errorf("our controller made %d successful status writes", n)
		}
		return nil
	})
}
