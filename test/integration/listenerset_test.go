package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// A Gateway allowing ListenerSets of its namespace, a ListenerSet with an HTTP listener
// on a port of its own, and an HTTPRoute attached to the ListenerSet's listener, on
// the real API server and Consul 1.15.4: the ListenerSet is accepted and programmed,
// the Gateway counts it, the route is accepted, and Consul's api-gateway entry has the
// merged listener, to which Consul binds the route's http-route.
func TestListenerSetMergedIntoConsulGateway(t *testing.T) {
	s := newConsulStack(t, "cs-lset")
	gateways := env.GatewayClient.GatewayV1()
	testenv.Update(t, gateways.Gateways(s.Namespace).Get, gateways.Gateways(s.Namespace).Update, "edge", func(edge *gatewayv1.Gateway) {
		edge.Spec.AllowedListeners = &gatewayv1.AllowedListeners{Namespaces: &gatewayv1.ListenerNamespaces{From: new(gatewayv1.NamespacesFromSame)}}
	})

	env.Create(t, testenv.ListenerSet(s.Namespace, "extra", gatewayv1.ParentGatewayReference{Name: "edge"},
		gatewayv1.ListenerEntry{Name: "alt", Port: 18090, Protocol: gatewayv1.HTTPProtocolType}))

	route := s.Route("web")
	route.Spec.ParentRefs = []gatewayv1.ParentReference{{
		Group: new(gatewayv1.Group(gatewayv1.GroupName)), Kind: new(gatewayv1.Kind("ListenerSet")), Name: "extra", SectionName: new(gatewayv1.SectionName("alt")),
	}}
	env.Create(t, route)

	startController(t, s.Controller, controllerOptions{consul: &consulOptions{clusterID: "it", translation: translate.Options{ManageServiceDefaults: true}}})

	testenv.Eventually(t, 30*time.Second, "ListenerSet accepted and programmed", func(context.Context) error {
		set, err := gateways.ListenerSets(s.Namespace).Get(t.Context(), "extra", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(set.Status.Listeners) != 1 || set.Status.Listeners[0].AttachedRoutes != 1 {
			return fmt.Errorf("listener statuses %+v", set.Status.Listeners)
		}
		got := testenv.ConditionReason(set.Status.Conditions, "Accepted") + " " + testenv.ConditionReason(set.Status.Conditions, "Programmed") +
			" " + testenv.ConditionReason(set.Status.Listeners[0].Conditions, "Programmed")
		if want := "True/Accepted True/Programmed True/Programmed"; got != want {
			return fmt.Errorf("Accepted, Programmed and its listener's Programmed: %s, want %s", got, want)
		}
		return nil
	})
	testenv.Eventually(t, 30*time.Second, "Gateway counts one attached ListenerSet", func(context.Context) error {
		gw, err := gateways.Gateways(s.Namespace).Get(t.Context(), "edge", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n := gw.Status.AttachedListenerSets; n == nil || *n != 1 {
			return fmt.Errorf("attachedListenerSets %v", deref(n))
		}
		return nil
	})
	testenv.Eventually(t, 30*time.Second, "route accepted on the ListenerSet and by Consul", func(context.Context) error {
		r, err := gateways.HTTPRoutes(s.Namespace).Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, p := range r.Status.Parents {
			if p.ControllerName == s.Controller && p.ParentRef.Name == "extra" {
				got := testenv.ConditionReason(p.Conditions, "Accepted") + " " + testenv.ConditionReason(p.Conditions, gwsync.ConsulAcceptedCondition)
				if got != "True/Accepted True/Accepted" {
					return fmt.Errorf("Accepted and ConsulAccepted: %s", got)
				}
				return nil
			}
		}
		return errors.New("no status of ours for parent extra")
	})

	listener := fmt.Sprintf("%s.extra.alt", s.Namespace)
	gwEntry := s.waitEntry(t, consulapi.APIGateway, s.naming.EntryName(s.Namespace, "edge"), "api-gateway with the merged listener", func(e consulapi.ConfigEntry) bool {
		gw, ok := e.(*consulapi.APIGatewayConfigEntry)
		return ok && slices.ContainsFunc(gw.Listeners, func(l consulapi.APIGatewayListener) bool { return l.Name == listener })
	}).(*consulapi.APIGatewayConfigEntry)
	for _, l := range gwEntry.Listeners {
		t.Logf("api-gateway listener %s port %d protocol %s", l.Name, l.Port, l.Protocol)
		if l.Name == listener && (l.Port != 18090 || l.Protocol != "http") {
			t.Errorf("merged listener %+v, want port 18090 http", l)
		}
	}
	if len(gwEntry.Listeners) != 2 {
		t.Errorf("api-gateway listeners %+v, want the Gateway's http and %s", gwEntry.Listeners, listener)
	}
	s.waitEntry(t, consulapi.HTTPRoute, s.naming.EntryName(s.Namespace, "web"), "http-route bound to the merged listener", func(e consulapi.ConfigEntry) bool {
		r, ok := e.(*consulapi.HTTPRouteConfigEntry)
		if !ok || len(r.Parents) != 1 || r.Parents[0].SectionName != listener {
			return false
		}
		for _, c := range r.Status.Conditions {
			if c.Type == string(consulapi.RouteConditionBound) && c.Status == "True" && c.Resource != nil && c.Resource.SectionName == listener {
				return true
			}
		}
		return false
	})
}
