package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	configclient "github.com/consul-gateway-controller/consul-gateway-controller/api/client"
	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/testcerts"
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
	ctx := t.Context()
	for ns, labels := range map[string]map[string]string{e.infra: nil, e.apps: {"team": "a"}, e.other: nil, e.certs: nil, e.backends: nil} {
		createObject(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}})
	}
	cert, key, err := testcerts.SelfSigned("www.example.com")
	if err != nil {
		t.Fatal(err)
	}
	createObject(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.certs, Name: "www"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key},
	})
	for _, ns := range []string{e.apps, e.infra, e.backends} {
		createObject(t, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}},
		})
	}
	createObject(t, &gatewayv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.certs, Name: "gateways"},
		Spec: gatewayv1.ReferenceGrantSpec{
			From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "Gateway", Namespace: gatewayv1.Namespace(e.infra)}},
			To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Secret"}},
		},
	})
	createObject(t, &gatewayv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.backends, Name: "routes"},
		Spec: gatewayv1.ReferenceGrantSpec{
			From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: gatewayv1.Namespace(e.apps)}},
			To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
		},
	})
	createObject(t, &gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: e.class},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: e.controller},
	})
	all := &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: ptr(gatewayv1.NamespacesFromAll)}}
	teamA := &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{
		From: ptr(gatewayv1.NamespacesFromSelector), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}},
	}}
	createObject(t, &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.infra, Name: "edge"},
		Spec: gatewayv1.GatewaySpec{
			GatewayClassName: gatewayv1.ObjectName(e.class),
			Listeners: []gatewayv1.Listener{
				{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType, AllowedRoutes: all},
				{Name: "https", Port: 443, Protocol: gatewayv1.HTTPSProtocolType, Hostname: ptr(gatewayv1.Hostname("www.example.com")), AllowedRoutes: teamA,
					TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "www", Namespace: ptr(gatewayv1.Namespace(e.certs))}}}},
				{Name: "tcp", Port: 5432, Protocol: gatewayv1.TCPProtocolType, AllowedRoutes: all},
				{Name: "udp", Port: 53, Protocol: gatewayv1.UDPProtocolType, AllowedRoutes: all},
			},
		},
	})
	createObject(t, &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.apps, Name: "no-grant"},
		Spec: gatewayv1.GatewaySpec{
			GatewayClassName: gatewayv1.ObjectName(e.class),
			Listeners: []gatewayv1.Listener{{Name: "https", Port: 443, Protocol: gatewayv1.HTTPSProtocolType,
				TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "www", Namespace: ptr(gatewayv1.Namespace(e.certs))}}}}},
		},
	})
	edge := func(section string) gatewayv1.ParentReference {
		ref := gatewayv1.ParentReference{Name: "edge", Namespace: ptr(gatewayv1.Namespace(e.infra))}
		if section != "" {
			ref.SectionName = ptr(gatewayv1.SectionName(section))
		}
		return ref
	}
	createObject(t, e.httpRoute(e.apps, "web", edge(""), "", nil))
	createObject(t, e.httpRoute(e.other, "web", edge("https"), "", nil))
	createObject(t, e.httpRoute(e.apps, "cross-backend", edge("http"), e.infra, nil))
	createObject(t, e.httpRoute(e.apps, "granted-backend", edge("http"), e.backends, nil))
	redirect := e.httpRoute(e.apps, "redirect", edge("http"), "", []gatewayv1.HTTPRouteFilter{{
		Type: gatewayv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gatewayv1.HTTPRequestRedirectFilter{Scheme: ptr("https")},
	}})
	redirect.Spec.Rules[0].BackendRefs = nil // the API forbids both
	createObject(t, redirect)
	createObject(t, e.httpRoute(e.apps, "missing-section", edge("nope"), "", nil))
	createObject(t, &gatewayv1.TCPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.apps, Name: "db"},
		Spec: gatewayv1.TCPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{edge("tcp")}},
			Rules:           []gatewayv1.TCPRouteRule{{BackendRefs: []gatewayv1.BackendRef{{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "echo", Port: ptr(gatewayv1.PortNumber(8080))}}}}},
		},
	})
	createObject(t, &gatewayv1.GRPCRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.apps, Name: "rpc"},
		Spec:       gatewayv1.GRPCRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{edge("")}}},
	})
	createObject(t, &gatewayv1.TLSRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.apps, Name: "passthrough"},
		Spec: gatewayv1.TLSRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{edge("")}},
			Hostnames:       []gatewayv1.Hostname{"db.example.com"},
			Rules:           []gatewayv1.TLSRouteRule{{BackendRefs: []gatewayv1.BackendRef{{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "echo", Port: ptr(gatewayv1.PortNumber(8080))}}}}},
		},
	})
	createObject(t, &gatewayv1.UDPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.apps, Name: "dns"},
		Spec: gatewayv1.UDPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{edge("udp")}},
			Rules:           []gatewayv1.UDPRouteRule{{BackendRefs: []gatewayv1.BackendRef{{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "echo", Port: ptr(gatewayv1.PortNumber(8080))}}}}},
		},
	})
	_ = ctx
}

func (e exampleSet) httpRoute(namespace, name string, parent gatewayv1.ParentReference, backendNamespace string, filters []gatewayv1.HTTPRouteFilter) *gatewayv1.HTTPRoute {
	backend := gatewayv1.BackendObjectReference{Name: "echo", Port: ptr(gatewayv1.PortNumber(8080))}
	if backendNamespace != "" {
		backend.Namespace = ptr(gatewayv1.Namespace(backendNamespace))
	}
	return &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{parent}},
			Rules: []gatewayv1.HTTPRouteRule{{
				Filters:     filters,
				BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: backend}}},
			}},
		},
	}
}

// createObject creates obj with the admin clients and deletes it when the test ends.
func createObject(t *testing.T, obj runtime.Object) {
	t.Helper()
	ctx := t.Context()
	var err error
	var cleanup func(context.Context) error
	gw := env.GatewayClient.GatewayV1()
	core := env.KubeClient.CoreV1()
	del := metav1.DeleteOptions{}
	switch o := obj.(type) {
	case *corev1.Namespace:
		_, err = core.Namespaces().Create(ctx, o, metav1.CreateOptions{})
		cleanup = func(ctx context.Context) error { return core.Namespaces().Delete(ctx, o.Name, del) }
	case *corev1.Secret:
		_, err = core.Secrets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.Service:
		_, err = core.Services(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.ServiceAccount:
		_, err = core.ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.ClusterRoleBinding:
		rbac := env.KubeClient.RbacV1()
		_, err = rbac.ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		cleanup = func(ctx context.Context) error { return rbac.ClusterRoleBindings().Delete(ctx, o.Name, del) }
	case *gatewayv1.GatewayClass:
		_, err = gw.GatewayClasses().Create(ctx, o, metav1.CreateOptions{})
		cleanup = func(ctx context.Context) error { return gw.GatewayClasses().Delete(ctx, o.Name, del) }
	case *gatewayv1.Gateway:
		_, err = gw.Gateways(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *gatewayv1.ListenerSet:
		_, err = gw.ListenerSets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *gatewayv1.HTTPRoute:
		_, err = gw.HTTPRoutes(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *gatewayv1.TCPRoute:
		_, err = gw.TCPRoutes(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *gatewayv1.GRPCRoute:
		_, err = gw.GRPCRoutes(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *gatewayv1.TLSRoute:
		_, err = gw.TLSRoutes(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *gatewayv1.UDPRoute:
		_, err = gw.UDPRoutes(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *gatewayv1.ReferenceGrant:
		_, err = gw.ReferenceGrants(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *v1alpha1.GatewayConfig:
		var configs *configclient.Clientset
		if configs, err = configclient.NewForConfig(env.Kube.Config("admin")); err == nil {
			_, err = configs.GatewayConfigs(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		}
	default:
		t.Fatalf("createObject: unexpected %T", obj)
	}
	if err != nil {
		t.Fatalf("create %T: %v", obj, err)
	}
	// Namespaced objects go with their namespace (the namespace controller is not
	// running, so they are only marked for deletion; tests never reuse names).
	if cleanup != nil {
		t.Cleanup(func() { _ = cleanup(context.Background()) })
	}
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
			conditionReason(p.Conditions, "Accepted"), conditionReason(p.Conditions, "ResolvedRefs")})
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
	classConds = conditionReason(class.Status.Conditions, "Accepted") + "," + conditionReason(class.Status.Conditions, "SupportedVersion")
	gateways = map[string][]listenerVerdict{}
	for _, ns := range []string{e.infra, e.apps} {
		list, err := gw.Gateways(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", nil, nil, err
		}
		for _, g := range list.Items {
			key := ns + "/" + g.Name + ":" + conditionReason(g.Status.Conditions, "Accepted")
			var ls []listenerVerdict
			for _, l := range g.Status.Listeners {
				ls = append(ls, listenerVerdict{string(l.Name), l.AttachedRoutes, conditionReason(l.Conditions, "Accepted"),
					conditionReason(l.Conditions, "ResolvedRefs"), conditionReason(l.Conditions, "Programmed")})
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
	tcp, err := gw.TCPRoutes(e.apps).Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		return "", nil, nil, err
	}
	routes["tcp:"+e.apps+"/db"] = ourParents(tcp.Status.Parents, e.controller)
	grpc, err := gw.GRPCRoutes(e.apps).Get(ctx, "rpc", metav1.GetOptions{})
	if err != nil {
		return "", nil, nil, err
	}
	routes["grpc:"+e.apps+"/rpc"] = ourParents(grpc.Status.Parents, e.controller)
	tls, err := gw.TLSRoutes(e.apps).Get(ctx, "passthrough", metav1.GetOptions{})
	if err != nil {
		return "", nil, nil, err
	}
	routes["tls:"+e.apps+"/passthrough"] = ourParents(tls.Status.Parents, e.controller)
	udp, err := gw.UDPRoutes(e.apps).Get(ctx, "dns", metav1.GetOptions{})
	if err != nil {
		return "", nil, nil, err
	}
	routes["udp:"+e.apps+"/dns"] = ourParents(udp.Status.Parents, e.controller)
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

	eventually(t, 30*time.Second, "example set converges", func() (bool, error) {
		class, gateways, routes, err := e.gotStatus(t.Context())
		if err != nil {
			return false, err
		}
		if diff := cmp.Diff("True/Accepted,True/SupportedVersion", class) + cmp.Diff(wantGateways, gateways) + cmp.Diff(wantRoutes, routes); diff != "" {
			return false, fmt.Errorf("status differs (-want +got):\n%s", diff)
		}
		return true, nil
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
	eventually(t, 30*time.Second, "the restarted controller confirms every object", func() (bool, error) {
		for _, k := range keys {
			if len(second.published.of(k.kind, k.key)) == 0 {
				return false, nil
			}
		}
		return true, nil
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

// TestStaleCacheConflictConvergesOnNewestSpec delays the controller's HTTPRoute watch
// so its cache lags the server, edits a route, and at once changes its Gateway so the
// route's status must change: the controller writes from the stale cache, gets 409,
// and converges on the newest spec; its confirmations never go back to the old one.
func TestStaleCacheConflictConvergesOnNewestSpec(t *testing.T) {
	const prefix = "stale"
	controller := gatewayv1.GatewayController("test.example.com/" + prefix)
	ns := prefix
	rc := startController(t, controller, controllerOptions{watchDelay: 1500 * time.Millisecond, delayResources: []string{"httproutes"}, delayNamespace: ns})
	createObject(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	createObject(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080}}}})
	createObject(t, &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: prefix}, Spec: gatewayv1.GatewayClassSpec{ControllerName: controller}})
	createObject(t, &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: prefix, Listeners: []gatewayv1.Listener{
			{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType},
		}},
	})
	e := exampleSet{}
	createObject(t, e.httpRoute(ns, "r", gatewayv1.ParentReference{Name: "gw"}, "", nil))
	routes := env.GatewayClient.GatewayV1().HTTPRoutes(ns)
	key := cache.ObjectName{Namespace: ns, Name: "r"}

	eventually(t, 30*time.Second, "route accepted", func() (bool, error) {
		r, err := routes.Get(t.Context(), "r", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got := ourParents(r.Status.Parents, controller)
		return len(got) == 1 && got[0].Accepted == "True/Accepted", nil
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
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		g, err := env.GatewayClient.GatewayV1().Gateways(ns).Get(t.Context(), "gw", metav1.GetOptions{})
		if err != nil {
			return err
		}
		g.Spec.Listeners[0].AllowedRoutes = &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{
			From: ptr(gatewayv1.NamespacesFromSelector), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"no": "match"}},
		}}
		_, err = env.GatewayClient.GatewayV1().Gateways(ns).Update(t.Context(), g, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	eventually(t, 30*time.Second, "route status reflects the newest spec", func() (bool, error) {
		r, err := routes.Get(t.Context(), "r", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range r.Status.Parents {
			if p.ControllerName == controller {
				c := p.Conditions[0]
				if c.Type == "Accepted" && c.Reason == string(gatewayv1.RouteReasonNotAllowedByListeners) && c.ObservedGeneration == newGeneration {
					return true, nil
				}
				return false, fmt.Errorf("%s=%s (%s) at generation %d of %d: %s", c.Type, c.Status, c.Reason, c.ObservedGeneration, newGeneration, c.Message)
			}
		}
		return false, errors.New("no parent of ours")
	})
	if n := rc.statusWrites.count(http.StatusConflict); n == 0 {
		t.Error("the controller never got 409: the stale-cache path was not exercised")
	} else {
		t.Logf("status writes answered 409: %d", n)
	}
	// The controller publishes a write's result once the response reaches it, which
	// can be after this test read the new status from the server.
	eventually(t, 10*time.Second, "the newest generation confirmed", func() (bool, error) {
		confirmed := rc.published.of("HTTPRoute", key)
		if len(confirmed) == 0 || confirmed[len(confirmed)-1].Object == nil {
			return false, errors.New("the last confirmation is not of the route")
		}
		if gen := confirmed[len(confirmed)-1].Object.(*gatewayv1.HTTPRoute).Generation; gen != newGeneration {
			return false, fmt.Errorf("last confirmed generation = %d, want %d", gen, newGeneration)
		}
		return true, nil
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
	controller := gatewayv1.GatewayController("test.example.com/" + prefix)
	rc := startController(t, controller, controllerOptions{})
	ns := prefix
	createObject(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	createObject(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080}}}})
	createObject(t, &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: prefix}, Spec: gatewayv1.GatewayClassSpec{ControllerName: controller}})
	createObject(t, &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-other"}, Spec: gatewayv1.GatewayClassSpec{ControllerName: "other.example.com/controller"}})
	for _, g := range []struct{ name, class string }{{"ours", prefix}, {"theirs", prefix + "-other"}} {
		createObject(t, &gatewayv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: g.name},
			Spec: gatewayv1.GatewaySpec{GatewayClassName: gatewayv1.ObjectName(g.class), Listeners: []gatewayv1.Listener{
				{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType},
			}},
		})
	}
	e := exampleSet{}
	route := e.httpRoute(ns, "r", gatewayv1.ParentReference{Name: "ours"}, "", nil)
	route.Spec.ParentRefs = append(route.Spec.ParentRefs, gatewayv1.ParentReference{Name: "theirs"})
	createObject(t, route)
	routes := env.GatewayClient.GatewayV1().HTTPRoutes(ns)

	theirs := gatewayv1.RouteParentStatus{
		ParentRef:      gatewayv1.ParentReference{Name: "theirs"},
		ControllerName: "other.example.com/controller",
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", Message: "written by the other controller",
			ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))}},
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		r, err := routes.Get(t.Context(), "r", metav1.GetOptions{})
		if err != nil {
			return err
		}
		r.Status.Parents = append(r.Status.Parents, theirs)
		_, err = routes.UpdateStatus(t.Context(), r, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The baseline is the entry as the server stored it (with the CRD's defaults).
	stored, err := routes.Get(t.Context(), "r", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range stored.Status.Parents {
		if p.ControllerName == theirs.ControllerName {
			theirs = p
		}
	}

	// Each edit makes our controller write the route's status again.
	for i, host := range []string{"", "a.example.com", "b.example.com"} {
		if host != "" {
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				r, err := routes.Get(t.Context(), "r", metav1.GetOptions{})
				if err != nil {
					return err
				}
				r.Spec.Hostnames = []gatewayv1.Hostname{gatewayv1.Hostname(host)}
				_, err = routes.Update(t.Context(), r, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		var got *gatewayv1.HTTPRoute
		eventually(t, 30*time.Second, "our status for the latest generation", func() (bool, error) {
			r, err := routes.Get(t.Context(), "r", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			got = r
			for _, p := range r.Status.Parents {
				if p.ControllerName == controller && p.Conditions[0].ObservedGeneration == r.Generation {
					return true, nil
				}
			}
			return false, nil
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
	eventually(t, 10*time.Second, "one successful status write per generation at least", func() (bool, error) {
		if n := rc.statusWrites.count(http.StatusOK); n < 3 {
			return false, fmt.Errorf("our controller made %d successful status writes", n)
		}
		return true, nil
	})
}
