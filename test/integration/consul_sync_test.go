package integration

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/testcerts"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
)

// consulStack is a namespace with a class, a Gateway and a Service, for the syncer's
// end-to-end tests.
type consulStack struct {
	ns         string
	controller gatewayv1.GatewayController
	naming     translate.Naming
}

func newConsulStack(t *testing.T, ns string) consulStack {
	t.Helper()
	s := consulStack{ns: ns, controller: gatewayv1.GatewayController("test.example.com/" + ns)}
	createObject(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	createObject(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ns + "-echo"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080}}}})
	createObject(t, &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: gatewayv1.GatewayClassSpec{ControllerName: s.controller}})
	createObject(t, &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: gatewayv1.ObjectName(ns), Listeners: []gatewayv1.Listener{
			{Name: "http", Port: 18080, Protocol: gatewayv1.HTTPProtocolType},
		}},
	})
	return s
}

// secureGateway creates the Gateway "secure" with an HTTPS listener whose certificate
// is the kubernetes.io/tls Secret "tls", and returns that Secret's key pair.
func (s consulStack) secureGateway(t *testing.T) (cert, key []byte) {
	t.Helper()
	cert, key, err := testcerts.SelfSigned("secure.example.com")
	if err != nil {
		t.Fatal(err)
	}
	createObject(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key}})
	createObject(t, &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "secure"},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: gatewayv1.ObjectName(s.ns), Listeners: []gatewayv1.Listener{{
			Name: "https", Port: 18443, Protocol: gatewayv1.HTTPSProtocolType,
			TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "tls"}}},
		}}},
	})
	return cert, key
}

func (s consulStack) route(name string, hostnames ...gatewayv1.Hostname) *gatewayv1.HTTPRoute {
	e := exampleSet{}
	r := e.httpRoute(s.ns, name, gatewayv1.ParentReference{Name: "edge"}, "", nil)
	r.Spec.Rules[0].BackendRefs[0].Name = gatewayv1.ObjectName(s.ns + "-echo")
	r.Spec.Hostnames = hostnames
	return r
}

func (s consulStack) entry(t *testing.T, kind, name string) consulapi.ConfigEntry {
	t.Helper()
	entry, _, err := env.ConsulClient.ConfigEntries().Get(kind, name, nil)
	if err != nil {
		if strings.Contains(err.Error(), "404") {
			return nil
		}
		t.Fatalf("read %s %s: %v", kind, name, err)
	}
	return entry
}

func (s consulStack) waitEntry(t *testing.T, kind, name, what string, ok func(consulapi.ConfigEntry) bool) consulapi.ConfigEntry {
	t.Helper()
	var got consulapi.ConfigEntry
	eventually(t, 30*time.Second, what, func() (bool, error) {
		got = s.entry(t, kind, name)
		return ok(got), nil
	})
	return got
}

func present(e consulapi.ConfigEntry) bool { return e != nil }
func absent(e consulapi.ConfigEntry) bool  { return e == nil }

func routeHostnames(e consulapi.ConfigEntry) []string {
	if r, ok := e.(*consulapi.HTTPRouteConfigEntry); ok {
		return r.Hostnames
	}
	return nil
}

// routeCondition reads one of our conditions on a route's first parent of ours.
func (s consulStack) routeCondition(t *testing.T, name, condType string) string {
	t.Helper()
	r, err := env.GatewayClient.GatewayV1().HTTPRoutes(s.ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range r.Status.Parents {
		if p.ControllerName == s.controller {
			return conditionReason(p.Conditions, condType)
		}
	}
	return ""
}

func TestConsulSyncLifecycle(t *testing.T) {
	s := newConsulStack(t, "cs-life")
	rc := startController(t, s.controller, controllerOptions{consul: &consulOptions{clusterID: "it", translation: translate.Options{ManageServiceDefaults: true}}})
	createObject(t, s.route("web"))
	gwName, routeName, svcName := s.naming.EntryName(s.ns, "edge"), s.naming.EntryName(s.ns, "web"), s.ns+"-echo"

	// 1. The entries appear with ownership meta, and Consul's verdict reaches status.
	gwEntry := s.waitEntry(t, consulapi.APIGateway, gwName, "api-gateway entry written", present)
	route := s.waitEntry(t, consulapi.HTTPRoute, routeName, "http-route entry written", present)
	s.waitEntry(t, consulapi.ServiceDefaults, svcName, "service-defaults written", present)
	for _, e := range []consulapi.ConfigEntry{gwEntry, route} {
		meta := e.GetMeta()
		if meta["gateway-controller"] != string(s.controller) || meta["gateway-controller-cluster"] != "it" || meta["k8s-namespace"] != s.ns || meta["k8s-uid"] == "" {
			t.Errorf("%s %s meta = %v, want our controller, cluster, namespace and a uid", e.GetKind(), e.GetName(), meta)
		}
	}
	eventually(t, 30*time.Second, "Consul's verdict reaches the Gateway and the route", func() (bool, error) {
		g, err := env.GatewayClient.GatewayV1().Gateways(s.ns).Get(t.Context(), "edge", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return conditionReason(g.Status.Conditions, "Programmed") == "True/Programmed" &&
			s.routeCondition(t, "web", gwsync.ConsulAcceptedCondition) == "True/Accepted", nil
	})

	// 2. A route edit updates exactly its entry.
	before := rc.consulWrites.total()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		r, err := env.GatewayClient.GatewayV1().HTTPRoutes(s.ns).Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		r.Spec.Hostnames = []gatewayv1.Hostname{"web.example.com"}
		_, err = env.GatewayClient.GatewayV1().HTTPRoutes(s.ns).Update(t.Context(), r, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s.waitEntry(t, consulapi.HTTPRoute, routeName, "http-route entry updated", func(e consulapi.ConfigEntry) bool {
		h := routeHostnames(e)
		return len(h) == 1 && h[0] == "web.example.com"
	})
	time.Sleep(2 * time.Second)
	if n := rc.consulWrites.total() - before; n != 1 {
		t.Errorf("the route edit made %d Consul writes, want exactly 1 (its http-route)", n)
	}

	// 3. An entry edited by hand is put back; a foreign entry is never touched.
	foreign := &consulapi.HTTPRouteConfigEntry{Kind: consulapi.HTTPRoute, Name: "foreign-route",
		Parents: []consulapi.ResourceReference{{Kind: consulapi.APIGateway, Name: gwName}},
		Rules:   []consulapi.HTTPRouteRule{{Services: []consulapi.HTTPService{{Name: svcName}}}}}
	if _, _, err := env.ConsulClient.ConfigEntries().Set(consul.Compact(foreign), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = env.ConsulClient.ConfigEntries().Delete(consulapi.HTTPRoute, "foreign-route", nil) })
	drifted := s.entry(t, consulapi.HTTPRoute, routeName).(*consulapi.HTTPRouteConfigEntry)
	drifted.Hostnames = []string{"hand.example.com"}
	if _, _, err := env.ConsulClient.ConfigEntries().Set(consul.Compact(drifted), nil); err != nil {
		t.Fatal(err)
	}
	s.waitEntry(t, consulapi.HTTPRoute, routeName, "hand edit put back", func(e consulapi.ConfigEntry) bool {
		h := routeHostnames(e)
		return len(h) == 1 && h[0] == "web.example.com"
	})
	// Consul itself rewrites the foreign entry's status (and ModifyIndex); what must not
	// change is what its owner wrote.
	foreignRules := s.entry(t, consulapi.HTTPRoute, "foreign-route").(*consulapi.HTTPRouteConfigEntry).Rules

	// 5. A restart against a converged system writes nothing: to Consul, and no status.
	time.Sleep(2 * time.Second)
	rc.stop()
	rc2 := startController(t, s.controller, controllerOptions{consul: &consulOptions{clusterID: "it", translation: translate.Options{ManageServiceDefaults: true}}})
	eventually(t, 30*time.Second, "the restarted controller confirms the route", func() (bool, error) {
		return len(rc2.published.of("HTTPRoute", cacheName(s.ns, "web"))) > 0, nil
	})
	time.Sleep(3 * time.Second)
	if n := rc2.consulWrites.total(); n != 0 {
		t.Errorf("the restarted controller made %d Consul writes against a converged system, want 0", n)
	}
	if n := rc2.statusWrites.total(); n != 0 {
		t.Errorf("the restarted controller made %d status writes against a converged system, want 0", n)
	}
	if got := s.entry(t, consulapi.HTTPRoute, "foreign-route"); got == nil || len(got.GetMeta()) != 0 || !cmp.Equal(got.(*consulapi.HTTPRouteConfigEntry).Rules, foreignRules) {
		t.Errorf("the foreign entry was changed or deleted: %+v", got)
	}

	// 2, continued. A delete removes exactly its entries: the route and the
	// service-defaults only it needed; the Gateway's stays.
	if err := env.GatewayClient.GatewayV1().HTTPRoutes(s.ns).Delete(t.Context(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitEntry(t, consulapi.HTTPRoute, routeName, "http-route entry deleted", absent)
	s.waitEntry(t, consulapi.ServiceDefaults, svcName, "service-defaults deleted", absent)
	if s.entry(t, consulapi.APIGateway, gwName) == nil {
		t.Error("the api-gateway entry went with the route")
	}
	if s.entry(t, consulapi.HTTPRoute, "foreign-route") == nil {
		t.Error("the foreign entry was deleted")
	}
}

func TestConsulSyncForeignNameClash(t *testing.T) {
	s := newConsulStack(t, "cs-clash")
	routeName := s.naming.EntryName(s.ns, "web")
	foreign := &consulapi.HTTPRouteConfigEntry{Kind: consulapi.HTTPRoute, Name: routeName,
		Parents: []consulapi.ResourceReference{{Kind: consulapi.APIGateway, Name: "somebody-elses"}},
		Rules:   []consulapi.HTTPRouteRule{{Services: []consulapi.HTTPService{{Name: "theirs"}}}}}
	if _, _, err := env.ConsulClient.ConfigEntries().Set(consul.Compact(foreign), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = env.ConsulClient.ConfigEntries().Delete(consulapi.HTTPRoute, routeName, nil) })
	// Consul rewrites the entry's status itself; what must not change is its content.
	theirs := s.entry(t, consulapi.HTTPRoute, routeName).(*consulapi.HTTPRouteConfigEntry)

	startController(t, s.controller, controllerOptions{consul: &consulOptions{clusterID: "it"}})
	createObject(t, s.route("web"))
	eventually(t, 30*time.Second, "the clash is reported on the route", func() (bool, error) {
		return s.routeCondition(t, "web", gwsync.ConsulAcceptedCondition) == "False/"+consul.ReasonForeignEntry, nil
	})
	got, ok := s.entry(t, consulapi.HTTPRoute, routeName).(*consulapi.HTTPRouteConfigEntry)
	if !ok || len(got.Meta) != 0 || !cmp.Equal(got.Rules, theirs.Rules) || !cmp.Equal(got.Parents, theirs.Parents) {
		t.Errorf("the foreign entry was changed: %+v", got)
	}
}

func TestConsulSyncCASRace(t *testing.T) {
	s := newConsulStack(t, "cs-race")
	routeName := s.naming.EntryName(s.ns, "web")
	var raced atomic.Int32
	// Before the syncer's first check-and-set update of the route's entry (a cas index
	// other than 0, which creates), another writer changes it. A write without cas is
	// not raced, so a syncer that overwrites blindly leaves raced at 0.
	beforeWrite := func(req *http.Request) {
		cas := req.URL.Query().Get("cas")
		if req.Method != http.MethodPut || cas == "" || cas == "0" || raced.Load() > 0 {
			return
		}
		entry := s.entry(t, consulapi.HTTPRoute, routeName)
		if entry == nil {
			return
		}
		raced.Add(1)
		other := entry.(*consulapi.HTTPRouteConfigEntry)
		other.Hostnames = []string{"interloper.example.com"}
		if _, _, err := env.ConsulClient.ConfigEntries().Set(consul.Compact(other), nil); err != nil {
			t.Errorf("interloper write: %v", err)
		}
	}
	startController(t, s.controller, controllerOptions{consul: &consulOptions{clusterID: "it", beforeWrite: beforeWrite}})
	createObject(t, s.route("web", "one.example.com"))
	s.waitEntry(t, consulapi.HTTPRoute, routeName, "route written", present)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		r, err := env.GatewayClient.GatewayV1().HTTPRoutes(s.ns).Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		r.Spec.Hostnames = []gatewayv1.Hostname{"two.example.com"}
		_, err = env.GatewayClient.GatewayV1().HTTPRoutes(s.ns).Update(t.Context(), r, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s.waitEntry(t, consulapi.HTTPRoute, routeName, "the race ends with the desired entry", func(e consulapi.ConfigEntry) bool {
		h := routeHostnames(e)
		return len(h) == 1 && h[0] == "two.example.com"
	})
	if raced.Load() == 0 {
		t.Fatal("no write raced the syncer: it sent no check-and-set update of the route's entry (it wrote without cas, or not at all)")
	}
}

func TestConsulSyncUnconfirmedRouteNeverReachesConsul(t *testing.T) {
	s := newConsulStack(t, "cs-unconfirmed")
	rc := startController(t, s.controller, controllerOptions{
		consul:       &consulOptions{clusterID: "it"},
		failStatusOf: []string{s.ns + "/unconfirmed"},
	})
	createObject(t, s.route("confirmed"))
	createObject(t, s.route("unconfirmed"))
	s.waitEntry(t, consulapi.HTTPRoute, s.naming.EntryName(s.ns, "confirmed"), "the confirmed route is written", present)
	// Only the unconfirmed route's status writes fail (503): one was attempted, so the
	// route was judged and reached the point of confirmation.
	eventually(t, 30*time.Second, "a status write of the unconfirmed route is attempted and fails", func() (bool, error) {
		return rc.statusWrites.count(http.StatusServiceUnavailable) > 0, nil
	})
	time.Sleep(3 * time.Second)
	if e := s.entry(t, consulapi.HTTPRoute, s.naming.EntryName(s.ns, "unconfirmed")); e != nil {
		t.Errorf("a route whose status the API server never confirmed reached Consul: %+v", e)
	}
}

func TestConsulSyncSurvivesConsulRestartAndOutage(t *testing.T) {
	s := newConsulStack(t, "cs-outage")
	startController(t, s.controller, controllerOptions{consul: &consulOptions{clusterID: "it"}})
	createObject(t, s.route("web", "one.example.com"))
	gwName, routeName := s.naming.EntryName(s.ns, "edge"), s.naming.EntryName(s.ns, "web")
	s.waitEntry(t, consulapi.HTTPRoute, routeName, "route written", present)

	// Consul comes back empty: everything is written again.
	if err := env.Consul.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := env.Consul.Start(); err != nil {
		t.Fatal(err)
	}
	s.waitEntry(t, consulapi.APIGateway, gwName, "api-gateway re-created", present)
	s.waitEntry(t, consulapi.HTTPRoute, routeName, "http-route re-created", present)

	// Consul is down while the route changes twice: the latest state arrives after.
	if err := env.Consul.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, host := range []gatewayv1.Hostname{"two.example.com", "three.example.com"} {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			r, err := env.GatewayClient.GatewayV1().HTTPRoutes(s.ns).Get(t.Context(), "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			r.Spec.Hostnames = []gatewayv1.Hostname{host}
			_, err = env.GatewayClient.GatewayV1().HTTPRoutes(s.ns).Update(t.Context(), r, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
	}
	if err := env.Consul.Start(); err != nil {
		t.Fatal(err)
	}
	s.waitEntry(t, consulapi.HTTPRoute, routeName, "the latest route arrives after the outage", func(e consulapi.ConfigEntry) bool {
		h := routeHostnames(e)
		return len(h) == 1 && h[0] == "three.example.com"
	})
	s.waitEntry(t, consulapi.APIGateway, gwName, "api-gateway back after the outage", present)
}

func cacheName(ns, name string) cache.ObjectName { return cache.ObjectName{Namespace: ns, Name: name} }

// TestCertificateRotationReachesConsul replaces a listener's certificate in its Secret.
// Nothing in any status changes, so only the Secret's own event can carry the new key
// pair to Consul's inline-certificate.
func TestCertificateRotationReachesConsul(t *testing.T) {
	s := newConsulStack(t, "cs-rotate")
	startController(t, s.controller, controllerOptions{consul: &consulOptions{clusterID: "it"}})
	cert, _ := s.secureGateway(t)
	entry := s.naming.CertificateName(s.ns, "tls")
	s.waitEntry(t, consulapi.InlineCertificate, entry, "the first certificate in Consul", func(e consulapi.ConfigEntry) bool {
		c, ok := e.(*consulapi.InlineCertificateConfigEntry)
		return ok && c.Certificate == string(cert)
	})

	rotated, key, err := testcerts.SelfSigned("secure.example.com")
	if err != nil {
		t.Fatal(err)
	}
	secret, err := env.KubeClient.CoreV1().Secrets(s.ns).Get(t.Context(), "tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secret.Data = map[string][]byte{corev1.TLSCertKey: rotated, corev1.TLSPrivateKeyKey: key}
	if _, err := env.KubeClient.CoreV1().Secrets(s.ns).Update(t.Context(), secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitEntry(t, consulapi.InlineCertificate, entry, "the rotated certificate in Consul", func(e consulapi.ConfigEntry) bool {
		c, ok := e.(*consulapi.InlineCertificateConfigEntry)
		return ok && c.Certificate == string(rotated)
	})
}
