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
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// sectionRoute is an HTTPRoute of the stack attached to one listener of gateway, sending
// to a Service that does not exist.
func sectionRoute(s testenv.Stack, name, gateway, section string) *gatewayv1.HTTPRoute {
	return testenv.HTTPRoute(s.Namespace, name, []gatewayv1.ParentReference{{
		Name: gatewayv1.ObjectName(gateway), SectionName: new(gatewayv1.SectionName(section)),
	}}, testenv.Backend("does-not-exist", 8080))
}

// listenerOf returns the named listener's status, or nil.
func listenerOf(gw *gatewayv1.Gateway, name gatewayv1.SectionName) *gatewayv1.ListenerStatus {
	for i := range gw.Status.Listeners {
		if gw.Status.Listeners[i].Name == name {
			return &gw.Status.Listeners[i]
		}
	}
	return nil
}

// A route attaches to a listener whatever the listener's status: the conformance case
// of GatewayWithAttachedRoutes (a certificateRef to a missing Secret), and a listener
// whose allowedRoutes.kinds mixes HTTPRoute with a kind that does not exist. The first
// cannot be programmed, so its route is served nowhere; the second serves HTTPRoutes,
// so its route waits for Consul's verdict (this controller runs without Consul).
func TestRoutesAttachWhateverTheListenerStatus(t *testing.T) {
	s := env.NewStack(t, "attach-status")
	startController(t, s.Controller, controllerOptions{})
	env.Create(t, s.Gateway("unresolved", gatewayv1.Listener{
		Name: "tls", Port: 443, Protocol: gatewayv1.HTTPSProtocolType,
		TLS: &gatewayv1.ListenerTLSConfig{Mode: new(gatewayv1.TLSModeTerminate), CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "does-not-exist"}}},
	}))
	env.Create(t, s.Gateway("mixed-kinds", gatewayv1.Listener{
		Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType,
		AllowedRoutes: &gatewayv1.AllowedRoutes{Kinds: []gatewayv1.RouteGroupKind{{Kind: "BogusRoute"}, {Kind: "HTTPRoute"}}},
	}))
	env.Create(t, sectionRoute(s, "on-unresolved", "unresolved", "tls"))
	env.Create(t, sectionRoute(s, "on-mixed-kinds", "mixed-kinds", "http"))

	for _, c := range []struct {
		gateway, route string
		listener       gatewayv1.SectionName
		resolvedRefs   string
		consulAccepted string
	}{
		{"unresolved", "on-unresolved", "tls", "False/InvalidCertificateRef", "False/ListenersNotValid"},
		{"mixed-kinds", "on-mixed-kinds", "http", "False/InvalidRouteKinds", "False/Pending"},
	} {
		testenv.Eventually(t, 30*time.Second, c.route+" attaches to "+c.gateway, func(context.Context) error {
			gw, err := env.GatewayClient.GatewayV1().Gateways(s.Namespace).Get(t.Context(), c.gateway, metav1.GetOptions{})
			if err != nil {
				return err
			}
			l := listenerOf(gw, c.listener)
			if l == nil {
				return fmt.Errorf("no status for listener %s", c.listener)
			}
			if got := testenv.ConditionReason(l.Conditions, "ResolvedRefs"); got != c.resolvedRefs || l.AttachedRoutes != 1 {
				return fmt.Errorf("listener %s: ResolvedRefs %s attachedRoutes %d, want %s and 1", c.listener, got, l.AttachedRoutes, c.resolvedRefs)
			}
			r, err := env.GatewayClient.GatewayV1().HTTPRoutes(s.Namespace).Get(t.Context(), c.route, metav1.GetOptions{})
			if err != nil {
				return err
			}
			p := testenv.ParentOf(r.Status.Parents, s.Controller)
			if p == nil {
				return fmt.Errorf("no parent status of ours yet")
			}
			got := testenv.ConditionReason(p.Conditions, "Accepted") + " " + testenv.ConditionReason(p.Conditions, "ResolvedRefs") + " " + testenv.ConditionReason(p.Conditions, gwsync.ConsulAcceptedCondition)
			if want := "True/Accepted False/BackendNotFound " + c.consulAccepted; got != want {
				return fmt.Errorf("route parent conditions %s, want %s", got, want)
			}
			return nil
		})
	}
}

// Another controller's conditions on a GatewayClass, a Gateway and a listener survive
// our writes (the spec: implementations MUST NOT remove conditions they are not
// responsible for). The other writer also tampers with one of our messages, so our
// controller must write again.
func TestOtherControllersConditionsSurviveOurWrites(t *testing.T) {
	s := env.NewStack(t, "foreign-conds")
	startController(t, s.Controller, controllerOptions{})
	env.Create(t, s.Gateway("gw", gatewayv1.Listener{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}))
	gateways := env.GatewayClient.GatewayV1().Gateways(s.Namespace)
	classes := env.GatewayClient.GatewayV1().GatewayClasses()
	testenv.Eventually(t, 30*time.Second, "the Gateway is accepted", func(context.Context) error {
		gw, err := gateways.Get(t.Context(), "gw", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := testenv.ConditionReason(gw.Status.Conditions, "Accepted"); got != "True/Accepted" || len(gw.Status.Listeners) != 1 {
			return fmt.Errorf("Accepted %q, %d listener statuses", got, len(gw.Status.Listeners))
		}

		return nil
	})

	theirs := metav1.Condition{Type: "example.com/Audited", Status: metav1.ConditionTrue, Reason: "Audited", Message: "checked by another controller",
		LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second))}
	tamper := func(conds []metav1.Condition) []metav1.Condition {
		for i := range conds {
			if conds[i].Type == "Accepted" {
				conds[i].Message = "tampered"
			}
		}
		return append(conds, theirs)
	}
	testenv.Update(t, gateways.Get, gateways.UpdateStatus, "gw", func(gw *gatewayv1.Gateway) {
		gw.Status.Conditions = tamper(gw.Status.Conditions)
		gw.Status.Listeners[0].Conditions = tamper(gw.Status.Listeners[0].Conditions)
	})
	testenv.Update(t, classes.Get, classes.UpdateStatus, s.Class, func(class *gatewayv1.GatewayClass) {
		class.Status.Conditions = tamper(class.Status.Conditions)
	})

	kept := func(where string, conds []metav1.Condition) error {
		if c := meta.FindStatusCondition(conds, "Accepted"); c == nil || c.Message == "tampered" {
			return fmt.Errorf("%s: our Accepted not written back yet", where)
		}
		if c := meta.FindStatusCondition(conds, theirs.Type); c == nil || c.Message != theirs.Message || c.Reason != theirs.Reason {
			return fmt.Errorf("%s: %s was removed or changed: %v", where, theirs.Type, c)
		}
		return nil
	}
	testenv.Eventually(t, 30*time.Second, "our writes keep the other controller's conditions", func(context.Context) error {
		gw, err := gateways.Get(t.Context(), "gw", metav1.GetOptions{})
		if err != nil {
			return err
		}
		class, err := classes.Get(t.Context(), s.Class, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for where, conds := range map[string][]metav1.Condition{"Gateway": gw.Status.Conditions, "listener": gw.Status.Listeners[0].Conditions, "GatewayClass": class.Status.Conditions} {
			if err := kept(where, conds); err != nil {
				return err
			}
		}
		return nil
	})
}

// A Gateway that comes to ask for client certificate validation, which Consul 1.15's
// API gateway cannot do, says so (Programmed False/NotExpressible) and its api-gateway
// entry leaves Consul: it is never served without the mTLS it asks for.
func TestGatewayAskingForMTLSIsNotServed(t *testing.T) {
	s := newConsulStack(t, "gw-mtls")
	startController(t, s.Controller, controllerOptions{consul: &consulOptions{clusterID: "it"}})
	env.Create(t, s.Route("web"))
	gwName := s.naming.EntryName(s.Namespace, "edge")
	s.waitEntry(t, consulapi.APIGateway, gwName, "api-gateway entry written", present)

	gateways := env.GatewayClient.GatewayV1().Gateways(s.Namespace)
	testenv.Update(t, gateways.Get, gateways.Update, "edge", func(gw *gatewayv1.Gateway) {
		gw.Spec.TLS = &gatewayv1.GatewayTLSConfig{Frontend: &gatewayv1.FrontendTLSConfig{Default: gatewayv1.TLSConfig{
			Validation: &gatewayv1.FrontendTLSValidation{CACertificateRefs: []gatewayv1.ObjectReference{{Kind: "ConfigMap", Name: "ca"}}},
		}}}
	})

	s.waitEntry(t, consulapi.APIGateway, gwName, "api-gateway entry removed", absent)
	testenv.Eventually(t, 30*time.Second, "the Gateway says why it is not programmed", func(context.Context) error {
		gw, err := env.GatewayClient.GatewayV1().Gateways(s.Namespace).Get(t.Context(), "edge", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := testenv.ConditionReason(gw.Status.Conditions, "Accepted") + " " + testenv.ConditionReason(gw.Status.Conditions, "Programmed"); got != "True/Accepted False/NotExpressible" {
			return fmt.Errorf("Gateway conditions %s", got)
		}
		if got := s.routeCondition(t, "web", gwsync.ConsulAcceptedCondition); got != "False/NotExpressible" {
			return fmt.Errorf("route ConsulAccepted %s", got)
		}
		return nil
	})
}

// The API server takes a namespace selector whose operator does not exist (the CRD
// does not enumerate operators); the listener says it cannot use it instead of
// silently selecting nothing.
func TestInvalidNamespaceSelectorIsReported(t *testing.T) {
	s := env.NewStack(t, "bad-selector")
	startController(t, s.Controller, controllerOptions{})
	env.Create(t, s.Gateway("gw", gatewayv1.Listener{
		Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType,
		AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{
			From: new(gatewayv1.NamespacesFromSelector),
			Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "team", Operator: "Among", Values: []string{"a"}},
			}},
		}},
	}))
	testenv.Eventually(t, 30*time.Second, "the listener reports its selector", func(context.Context) error {
		gw, err := env.GatewayClient.GatewayV1().Gateways(s.Namespace).Get(t.Context(), "gw", metav1.GetOptions{})
		if err != nil {
			return err
		}
		l := listenerOf(gw, "http")
		if l == nil {
			return fmt.Errorf("no listener status yet")
		}
		c := meta.FindStatusCondition(l.Conditions, "Accepted")
		if c == nil || string(c.Status)+"/"+c.Reason != "False/UnsupportedValue" || !strings.Contains(c.Message, "not a valid label selector") {
			return fmt.Errorf("listener Accepted %+v, want False/UnsupportedValue saying the selector is not valid", c)
		}
		return nil
	})
}
