package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
)

// specSet is a namespace and a class of ours for one test of the spec's status rules.
type specSet struct {
	ns         string
	class      string
	controller gatewayv1.GatewayController
}

func newSpecSet(t *testing.T, prefix string) specSet {
	t.Helper()
	s := specSet{ns: prefix, class: prefix, controller: gatewayv1.GatewayController("test.example.com/" + prefix)}
	createObject(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}})
	createObject(t, &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: s.class},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: s.controller},
	})
	return s
}

func (s specSet) gateway(name string, listeners ...gatewayv1.Listener) *gatewayv1.Gateway {
	return &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name},
		Spec:       gatewayv1.GatewaySpec{GatewayClassName: gatewayv1.ObjectName(s.class), Listeners: listeners},
	}
}

func (s specSet) route(name, gateway, section string) *gatewayv1.HTTPRoute {
	return &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{
				Name: gatewayv1.ObjectName(gateway), SectionName: ptr(gatewayv1.SectionName(section)),
			}}},
			Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
				BackendObjectReference: gatewayv1.BackendObjectReference{Name: "does-not-exist", Port: ptr(gatewayv1.PortNumber(8080))},
			}}}}},
		},
	}
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
	s := newSpecSet(t, "attach-status")
	startController(t, s.controller, controllerOptions{})
	createObject(t, s.gateway("unresolved", gatewayv1.Listener{
		Name: "tls", Port: 443, Protocol: gatewayv1.HTTPSProtocolType,
		TLS: &gatewayv1.ListenerTLSConfig{Mode: ptr(gatewayv1.TLSModeTerminate), CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "does-not-exist"}}},
	}))
	createObject(t, s.gateway("mixed-kinds", gatewayv1.Listener{
		Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType,
		AllowedRoutes: &gatewayv1.AllowedRoutes{Kinds: []gatewayv1.RouteGroupKind{{Kind: "BogusRoute"}, {Kind: "HTTPRoute"}}},
	}))
	createObject(t, s.route("on-unresolved", "unresolved", "tls"))
	createObject(t, s.route("on-mixed-kinds", "mixed-kinds", "http"))

	for _, c := range []struct {
		gateway, route string
		listener       gatewayv1.SectionName
		resolvedRefs   string
		consulAccepted string
	}{
		{"unresolved", "on-unresolved", "tls", "False/InvalidCertificateRef", "False/ListenersNotValid"},
		{"mixed-kinds", "on-mixed-kinds", "http", "False/InvalidRouteKinds", "False/Pending"},
	} {
		eventually(t, 30*time.Second, c.route+" attaches to "+c.gateway, func() (bool, error) {
			gw, err := env.GatewayClient.GatewayV1().Gateways(s.ns).Get(t.Context(), c.gateway, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			l := listenerOf(gw, c.listener)
			if l == nil {
				return false, fmt.Errorf("no status for listener %s", c.listener)
			}
			if got := conditionReason(l.Conditions, "ResolvedRefs"); got != c.resolvedRefs || l.AttachedRoutes != 1 {
				return false, fmt.Errorf("listener %s: ResolvedRefs %s attachedRoutes %d, want %s and 1", c.listener, got, l.AttachedRoutes, c.resolvedRefs)
			}
			r, err := env.GatewayClient.GatewayV1().HTTPRoutes(s.ns).Get(t.Context(), c.route, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			p := ourParent(r.Status.Parents, s.controller)
			if p == nil {
				return false, fmt.Errorf("no parent status of ours yet")
			}
			got := conditionReason(p.Conditions, "Accepted") + " " + conditionReason(p.Conditions, "ResolvedRefs") + " " + conditionReason(p.Conditions, gwsync.ConsulAcceptedCondition)
			if want := "True/Accepted False/BackendNotFound " + c.consulAccepted; got != want {
				return false, fmt.Errorf("route parent conditions %s, want %s", got, want)
			}
			return true, nil
		})
	}
}

// ourParent returns the first parent status of controller, or nil.
func ourParent(parents []gatewayv1.RouteParentStatus, controller gatewayv1.GatewayController) *gatewayv1.RouteParentStatus {
	for i := range parents {
		if parents[i].ControllerName == controller {
			return &parents[i]
		}
	}
	return nil
}

// Another controller's conditions on a GatewayClass, a Gateway and a listener survive
// our writes (the spec: implementations MUST NOT remove conditions they are not
// responsible for). The other writer also tampers with one of our messages, so our
// controller must write again.
func TestOtherControllersConditionsSurviveOurWrites(t *testing.T) {
	s := newSpecSet(t, "foreign-conds")
	startController(t, s.controller, controllerOptions{})
	createObject(t, s.gateway("gw", gatewayv1.Listener{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}))
	gateways := env.GatewayClient.GatewayV1().Gateways(s.ns)
	classes := env.GatewayClient.GatewayV1().GatewayClasses()
	eventually(t, 30*time.Second, "the Gateway is accepted", func() (bool, error) {
		gw, err := gateways.Get(t.Context(), "gw", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return conditionReason(gw.Status.Conditions, "Accepted") == "True/Accepted" && len(gw.Status.Listeners) == 1, nil
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
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		gw, err := gateways.Get(t.Context(), "gw", metav1.GetOptions{})
		if err != nil {
			return err
		}
		gw.Status.Conditions = tamper(gw.Status.Conditions)
		gw.Status.Listeners[0].Conditions = tamper(gw.Status.Listeners[0].Conditions)
		_, err = gateways.UpdateStatus(t.Context(), gw, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		class, err := classes.Get(t.Context(), s.class, metav1.GetOptions{})
		if err != nil {
			return err
		}
		class.Status.Conditions = tamper(class.Status.Conditions)
		_, err = classes.UpdateStatus(t.Context(), class, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}

	kept := func(where string, conds []metav1.Condition) error {
		if c := findCondition(conds, "Accepted"); c == nil || c.Message == "tampered" {
			return fmt.Errorf("%s: our Accepted not written back yet", where)
		}
		if c := findCondition(conds, theirs.Type); c == nil || c.Message != theirs.Message || c.Reason != theirs.Reason {
			return fmt.Errorf("%s: %s was removed or changed: %v", where, theirs.Type, c)
		}
		return nil
	}
	eventually(t, 30*time.Second, "our writes keep the other controller's conditions", func() (bool, error) {
		gw, err := gateways.Get(t.Context(), "gw", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		class, err := classes.Get(t.Context(), s.class, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for where, conds := range map[string][]metav1.Condition{"Gateway": gw.Status.Conditions, "listener": gw.Status.Listeners[0].Conditions, "GatewayClass": class.Status.Conditions} {
			if err := kept(where, conds); err != nil {
				return false, err
			}
		}
		return true, nil
	})
}

// A Gateway that comes to ask for client certificate validation, which Consul 1.15's
// API gateway cannot do, says so (Programmed False/NotExpressible) and its api-gateway
// entry leaves Consul: it is never served without the mTLS it asks for.
func TestGatewayAskingForMTLSIsNotServed(t *testing.T) {
	s := newConsulStack(t, "gw-mtls")
	startController(t, s.controller, controllerOptions{consul: &consulOptions{clusterID: "it"}})
	createObject(t, s.route("web"))
	gwName := s.naming.EntryName(s.ns, "edge")
	s.waitEntry(t, consulapi.APIGateway, gwName, "api-gateway entry written", present)

	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		gw, err := env.GatewayClient.GatewayV1().Gateways(s.ns).Get(t.Context(), "edge", metav1.GetOptions{})
		if err != nil {
			return err
		}
		gw.Spec.TLS = &gatewayv1.GatewayTLSConfig{Frontend: &gatewayv1.FrontendTLSConfig{Default: gatewayv1.TLSConfig{
			Validation: &gatewayv1.FrontendTLSValidation{CACertificateRefs: []gatewayv1.ObjectReference{{Kind: "ConfigMap", Name: "ca"}}},
		}}}
		_, err = env.GatewayClient.GatewayV1().Gateways(s.ns).Update(t.Context(), gw, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s.waitEntry(t, consulapi.APIGateway, gwName, "api-gateway entry removed", absent)
	eventually(t, 30*time.Second, "the Gateway says why it is not programmed", func() (bool, error) {
		gw, err := env.GatewayClient.GatewayV1().Gateways(s.ns).Get(t.Context(), "edge", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if got := conditionReason(gw.Status.Conditions, "Accepted") + " " + conditionReason(gw.Status.Conditions, "Programmed"); got != "True/Accepted False/NotExpressible" {
			return false, fmt.Errorf("Gateway conditions %s", got)
		}
		if got := s.routeCondition(t, "web", gwsync.ConsulAcceptedCondition); got != "False/NotExpressible" {
			return false, fmt.Errorf("route ConsulAccepted %s", got)
		}
		return true, nil
	})
}

// The API server takes a namespace selector whose operator does not exist (the CRD
// does not enumerate operators); the listener says it cannot use it instead of
// silently selecting nothing.
func TestInvalidNamespaceSelectorIsReported(t *testing.T) {
	s := newSpecSet(t, "bad-selector")
	startController(t, s.controller, controllerOptions{})
	createObject(t, s.gateway("gw", gatewayv1.Listener{
		Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType,
		AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{
			From: ptr(gatewayv1.NamespacesFromSelector),
			Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "team", Operator: "Among", Values: []string{"a"}},
			}},
		}},
	}))
	eventually(t, 30*time.Second, "the listener reports its selector", func() (bool, error) {
		gw, err := env.GatewayClient.GatewayV1().Gateways(s.ns).Get(t.Context(), "gw", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		l := listenerOf(gw, "http")
		if l == nil {
			return false, fmt.Errorf("no listener status yet")
		}
		c := findCondition(l.Conditions, "Accepted")
		if c == nil || string(c.Status)+"/"+c.Reason != "False/UnsupportedValue" || !strings.Contains(c.Message, "not a valid label selector") {
			return false, fmt.Errorf("listener Accepted %+v, want False/UnsupportedValue saying the selector is not valid", c)
		}
		return true, nil
	})
}
