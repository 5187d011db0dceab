package integration

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// exampleSet is a class, a gateway with HTTP, HTTPS, TCP and UDP listeners, and valid
// and invalid routes across namespaces, with and without ReferenceGrants. prefix keeps
// tests apart.
type exampleSet struct {
	prefix     string
	controller gatewayv1.GatewayController
	class      string
	infra      string // gateways
	apps       string // labelled team=a
	other      string // unlabelled
	certs      string // the certificate, granted to Gateways of infra
	backends   string // a backend Service, granted to HTTPRoutes of apps
}

func newExampleSet(prefix string) exampleSet {
	return exampleSet{
		prefix:     prefix,
		controller: gatewayv1.GatewayController("test.example.com/" + prefix),
		class:      prefix,
		infra:      prefix + "-infra",
		apps:       prefix + "-apps",
		other:      prefix + "-other",
		certs:      prefix + "-certs",
		backends:   prefix + "-backends",
	}
}

func (e exampleSet) create(t *testing.T) {
	t.Helper()
	for ns, labels := range map[string]map[string]string{e.infra: nil, e.apps: {"team": "a"}, e.other: nil, e.certs: nil, e.backends: nil} {
		env.Create(t, testenv.Namespace(ns, labels))
	}
	cert, key := testenv.SelfSigned(t, "www.example.com")
	env.Create(t, testenv.TLSSecret(e.certs, "www", cert, key))
	for _, ns := range []string{e.apps, e.infra, e.backends} {
		echo := testenv.Service(ns, "echo", 8080)
		echo.Spec.Ports[0].Name = "http"
		env.Create(t, echo)
	}
	env.Create(t, testenv.ReferenceGrant(e.certs, "gateways", "Secret", testenv.GrantFrom("Gateway", e.infra)))
	env.Create(t, testenv.ReferenceGrant(e.backends, "routes", "Service", testenv.GrantFrom("HTTPRoute", e.apps)))
	env.Create(t, testenv.GatewayClass(e.class, e.controller))
	all := &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: new(gatewayv1.NamespacesFromAll)}}
	teamA := &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{
		From: new(gatewayv1.NamespacesFromSelector), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}},
	}}
	www := gatewayv1.SecretObjectReference{Name: "www", Namespace: new(gatewayv1.Namespace(e.certs))}
	http, https := testenv.HTTPListener("http", 80), testenv.HTTPSListener("https", 443, www)
	http.AllowedRoutes = all
	https.Hostname, https.AllowedRoutes = new(gatewayv1.Hostname("www.example.com")), teamA
	env.Create(t, testenv.Gateway(e.infra, "edge", e.class, http, https,
		gatewayv1.Listener{Name: "tcp", Port: 5432, Protocol: gatewayv1.TCPProtocolType, AllowedRoutes: all},
		gatewayv1.Listener{Name: "udp", Port: 53, Protocol: gatewayv1.UDPProtocolType, AllowedRoutes: all},
	))
	env.Create(t, testenv.Gateway(e.apps, "no-grant", e.class, testenv.HTTPSListener("https", 443, www)))
	edge := func(section string) []gatewayv1.ParentReference {
		ref := gatewayv1.ParentReference{Name: "edge", Namespace: new(gatewayv1.Namespace(e.infra))}
		if section != "" {
			ref.SectionName = new(gatewayv1.SectionName(section))
		}
		return []gatewayv1.ParentReference{ref}
	}
	echo := testenv.Backend("echo", 8080)
	echoIn := func(ns string) gatewayv1.BackendObjectReference {
		ref := echo
		ref.Namespace = new(gatewayv1.Namespace(ns))
		return ref
	}
	env.Create(t, testenv.HTTPRoute(e.apps, "web", edge(""), echo))
	env.Create(t, testenv.HTTPRoute(e.other, "web", edge("https"), echo))
	env.Create(t, testenv.HTTPRoute(e.apps, "cross-backend", edge("http"), echoIn(e.infra)))
	env.Create(t, testenv.HTTPRoute(e.apps, "granted-backend", edge("http"), echoIn(e.backends)))
	redirect := testenv.HTTPRoute(e.apps, "redirect", edge("http")) // the API forbids backends with it
	redirect.Spec.Rules = []gatewayv1.HTTPRouteRule{{Filters: []gatewayv1.HTTPRouteFilter{{
		Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{Scheme: new("https")},
	}}}}
	env.Create(t, redirect)
	env.Create(t, testenv.HTTPRoute(e.apps, "missing-section", edge("nope"), echo))
	env.Create(t, testenv.TCPRoute(e.apps, "db", edge("tcp"), echo))
	env.Create(t, testenv.GRPCRoute(e.apps, "rpc", edge("")))
	env.Create(t, testenv.TLSRoute(e.apps, "passthrough", edge(""), []gatewayv1.Hostname{"db.example.com"}, echo))
	env.Create(t, testenv.UDPRoute(e.apps, "dns", edge("udp"), echo))
}

type parentVerdict struct {
	Gateway, Section, Accepted, ResolvedRefs string
}

// ourParents summarises the route status entries written by controller.
func ourParents(parents []gatewayv1.RouteParentStatus, controller gatewayv1.GatewayController) []parentVerdict {
	var out []parentVerdict
	for _, p := range parents {
		if p.ControllerName != controller {
			continue
		}
		section := ""
		if p.ParentRef.SectionName != nil {
			section = string(*p.ParentRef.SectionName)
		}
		out = append(out, parentVerdict{string(p.ParentRef.Name), section,
			testenv.ConditionReason(p.Conditions, "Accepted"), testenv.ConditionReason(p.Conditions, "ResolvedRefs")})
	}
	return out
}

func (e exampleSet) wantRoutes() map[string][]parentVerdict {
	ok := "True/ResolvedRefs"
	return map[string][]parentVerdict{
		e.apps + "/web":             {{"edge", "", "True/Accepted", ok}},
		e.other + "/web":            {{"edge", "https", "False/NotAllowedByListeners", "False/BackendNotFound"}}, // no Service there
		e.apps + "/cross-backend":   {{"edge", "http", "True/Accepted", "False/RefNotPermitted"}},
		e.apps + "/granted-backend": {{"edge", "http", "True/Accepted", ok}},
		e.apps + "/redirect":        {{"edge", "http", "False/UnsupportedValue", ok}},
		e.apps + "/missing-section": {{"edge", "nope", "False/NoMatchingParent", ok}},
	}
}

type listenerVerdict struct {
	Name             string
	Attached         int32
	Accepted, Refs   string
	ProgrammedReason string
}

// gotStatus reads what the API server holds for the example set.
func (e exampleSet) gotStatus(ctx context.Context) (classConds string, gateways map[string][]listenerVerdict, routes map[string][]parentVerdict, err error) {
	gw := env.GatewayClient.GatewayV1()
	class, err := gw.GatewayClasses().Get(ctx, e.class, metav1.GetOptions{})
	if err != nil {
		return "", nil, nil, err
	}
	classConds = testenv.ConditionReason(class.Status.Conditions, "Accepted") + "," + testenv.ConditionReason(class.Status.Conditions, "SupportedVersion")
	gateways = map[string][]listenerVerdict{}
	for _, ns := range []string{e.infra, e.apps} {
		list, err := gw.Gateways(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", nil, nil, err
		}
		for _, g := range list.Items {
			key := ns + "/" + g.Name + ":" + testenv.ConditionReason(g.Status.Conditions, "Accepted")
			var ls []listenerVerdict
			for _, l := range g.Status.Listeners {
				ls = append(ls, listenerVerdict{string(l.Name), l.AttachedRoutes, testenv.ConditionReason(l.Conditions, "Accepted"),
					testenv.ConditionReason(l.Conditions, "ResolvedRefs"), testenv.ConditionReason(l.Conditions, "Programmed")})
			}
			gateways[key] = ls
		}
	}
	routes = map[string][]parentVerdict{}
	for _, ns := range []string{e.apps, e.other} {
		list, err := gw.HTTPRoutes(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", nil, nil, err
		}
		for _, r := range list.Items {
			routes[ns+"/"+r.Name] = ourParents(r.Status.Parents, e.controller)
		}
	}
	get := metav1.GetOptions{}
	for key, read := range map[string]func() (runtime.Object, error){
		"tcp:" + e.apps + "/db":          func() (runtime.Object, error) { return gw.TCPRoutes(e.apps).Get(ctx, "db", get) },
		"grpc:" + e.apps + "/rpc":        func() (runtime.Object, error) { return gw.GRPCRoutes(e.apps).Get(ctx, "rpc", get) },
		"tls:" + e.apps + "/passthrough": func() (runtime.Object, error) { return gw.TLSRoutes(e.apps).Get(ctx, "passthrough", get) },
		"udp:" + e.apps + "/dns":         func() (runtime.Object, error) { return gw.UDPRoutes(e.apps).Get(ctx, "dns", get) },
	} {
		route, err := read()
		if err != nil {
			return "", nil, nil, err
		}
		kind, _ := gatewayapi.RouteOf(route)
		routes[key] = ourParents(kind.Parents(route), e.controller)
	}
	return classConds, gateways, routes, nil
}

// TestExampleSetConvergesAndRestartWritesNothing covers the example set's status and
// a restart against the converged system.
func TestExampleSetConvergesAndRestartWritesNothing(t *testing.T) {
	e := newExampleSet("example")
	first := startController(t, e.controller, controllerOptions{})
	e.create(t)

	ok := "True/ResolvedRefs"
	wantGateways := map[string][]listenerVerdict{
		e.infra + "/edge:True/ListenersNotValid": {
			{"http", 3, "True/Accepted", ok, "False/Pending"},
			{"https", 1, "True/Accepted", ok, "False/Pending"},
			{"tcp", 1, "True/Accepted", ok, "False/Pending"},
			{"udp", 0, "False/UnsupportedProtocol", ok, "False/Invalid"},
		},
		e.apps + "/no-grant:False/ListenersNotValid": {
			{"https", 0, "True/Accepted", "False/RefNotPermitted", "False/Invalid"},
		},
	}
	wantRoutes := e.wantRoutes()
	wantRoutes["tcp:"+e.apps+"/db"] = []parentVerdict{{"edge", "tcp", "True/Accepted", ok}}
	wantRoutes["grpc:"+e.apps+"/rpc"] = []parentVerdict{{"edge", "", "False/NotAllowedByListeners", ok}}
	wantRoutes["tls:"+e.apps+"/passthrough"] = []parentVerdict{{"edge", "", "False/NotAllowedByListeners", ok}}
	wantRoutes["udp:"+e.apps+"/dns"] = []parentVerdict{{"edge", "udp", "False/NotAllowedByListeners", ok}}

	testenv.Eventually(t, 30*time.Second, "example set converges", func(ctx context.Context) error {
		class, gateways, routes, err := e.gotStatus(ctx)
		if err != nil {
			return err
		}
		if diff := cmp.Diff("True/Accepted,True/SupportedVersion", class) + cmp.Diff(wantGateways, gateways) + cmp.Diff(wantRoutes, routes); diff != "" {
			return fmt.Errorf("status differs (-want +got):\n%s", diff)
		}
		return nil
	})
	if first.statusWrites.count(http.StatusOK) == 0 {
		t.Fatal("converged without a successful status write")
	}

	// Let in-flight work settle, then restart: a converged system needs no write.
	time.Sleep(2 * time.Second)
	first.stop()
	second := startController(t, e.controller, controllerOptions{})
	keys := []struct {
		kind gatewayv1.Kind
		key  cache.ObjectName
	}{
		{"GatewayClass", cache.ObjectName{Name: e.class}},
		{"Gateway", cache.ObjectName{Namespace: e.infra, Name: "edge"}},
		{"Gateway", cache.ObjectName{Namespace: e.apps, Name: "no-grant"}},
		{"HTTPRoute", cache.ObjectName{Namespace: e.apps, Name: "web"}},
		{"HTTPRoute", cache.ObjectName{Namespace: e.other, Name: "web"}},
		{"TCPRoute", cache.ObjectName{Namespace: e.apps, Name: "db"}},
		{"GRPCRoute", cache.ObjectName{Namespace: e.apps, Name: "rpc"}},
		{"TLSRoute", cache.ObjectName{Namespace: e.apps, Name: "passthrough"}},
		{"UDPRoute", cache.ObjectName{Namespace: e.apps, Name: "dns"}},
	}
	testenv.Eventually(t, 30*time.Second, "the restarted controller confirms every object", func(context.Context) error {
		for _, k := range keys {
			if len(second.published.of(k.kind, k.key)) == 0 {
				return fmt.Errorf("%s %s not confirmed yet", k.kind, k.key)
			}
		}
		return nil
	})

	time.Sleep(2 * time.Second)
	if n := second.statusWrites.total(); n != 0 {
		t.Errorf("the restarted controller made %d status writes against a converged system, want 0", n)
	}
	for _, k := range keys {
		for _, c := range second.published.of(k.kind, k.key) {
			if c.Object == nil {
				t.Errorf("%s %s confirmed as removed", k.kind, k.key)
			}
		}
	}
}
