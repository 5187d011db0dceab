package integration

import (
	"fmt"
	"slices"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

// A Gateway allowing ListenerSets of its namespace, a ListenerSet with an HTTP listener
// on a port of its own, and an HTTPRoute attached to the ListenerSet's listener, on
// the real API server and Consul 1.15.4: the ListenerSet is accepted and programmed,
// the Gateway counts it, the route is accepted, and Consul's api-gateway entry has the
// merged listener, to which Consul binds the route's http-route.
func TestListenerSetMergedIntoConsulGateway(t *testing.T) {
	s := newConsulStack(t, "cs-lset")
	gateways := env.GatewayClient.GatewayV1()
	edge, err := gateways.Gateways(s.ns).Get(t.Context(), "edge", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	edge.Spec.AllowedListeners = &gatewayv1.AllowedListeners{Namespaces: &gatewayv1.ListenerNamespaces{From: new(gatewayv1.NamespacesFromSame)}}
	if _, err := gateways.Gateways(s.ns).Update(t.Context(), edge, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	createObject(t, &gatewayv1.ListenerSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "extra"},
		Spec: gatewayv1.ListenerSetSpec{
			ParentRef: gatewayv1.ParentGatewayReference{Name: "edge"},
			Listeners: []gatewayv1.ListenerEntry{{Name: "alt", Port: 18090, Protocol: gatewayv1.HTTPProtocolType}},
		},
	})
	route := s.route("web")
	route.Spec.ParentRefs = []gatewayv1.ParentReference{{
		Group: new(gatewayv1.Group(gatewayv1.GroupName)), Kind: new(gatewayv1.Kind("ListenerSet")), Name: "extra", SectionName: new(gatewayv1.SectionName("alt")),
	}}
	createObject(t, route)

	startController(t, s.controller, controllerOptions{consul: &consulOptions{clusterID: "it", translation: translate.Options{ManageServiceDefaults: true}}})

	eventually(t, 30*time.Second, "ListenerSet accepted and programmed", func() (bool, error) {
		set, err := gateways.ListenerSets(s.ns).Get(t.Context(), "extra", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if len(set.Status.Listeners) != 1 || set.Status.Listeners[0].AttachedRoutes != 1 {
			return false, nil
		}
		return conditionReason(set.Status.Conditions, "Accepted") == "True/Accepted" &&
			conditionReason(set.Status.Conditions, "Programmed") == "True/Programmed" &&
			conditionReason(set.Status.Listeners[0].Conditions, "Programmed") == "True/Programmed", nil
	})
	eventually(t, 30*time.Second, "Gateway counts one attached ListenerSet", func() (bool, error) {
		gw, err := gateways.Gateways(s.ns).Get(t.Context(), "edge", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return gw.Status.AttachedListenerSets != nil && *gw.Status.AttachedListenerSets == 1, nil
	})
	eventually(t, 30*time.Second, "route accepted on the ListenerSet and by Consul", func() (bool, error) {
		r, err := gateways.HTTPRoutes(s.ns).Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range r.Status.Parents {
			if p.ControllerName == s.controller && p.ParentRef.Name == "extra" {
				return conditionReason(p.Conditions, "Accepted") == "True/Accepted" &&
					conditionReason(p.Conditions, "consul-gateway-controller.github.io/ConsulAccepted") == "True/Accepted", nil
			}
		}
		return false, nil
	})

	listener := fmt.Sprintf("%s.extra.alt", s.ns)
	gwEntry := s.waitEntry(t, consulapi.APIGateway, s.naming.EntryName(s.ns, "edge"), "api-gateway with the merged listener", func(e consulapi.ConfigEntry) bool {
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
	s.waitEntry(t, consulapi.HTTPRoute, s.naming.EntryName(s.ns, "web"), "http-route bound to the merged listener", func(e consulapi.ConfigEntry) bool {
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
