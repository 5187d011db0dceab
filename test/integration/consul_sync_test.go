package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/testcerts"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// consulStack is a testenv.Stack for the syncer's end-to-end tests: its Gateway "edge"
// listens on a port of its own (18080) and its backend Service is named after the
// namespace, since Consul names service-defaults after the Service alone.
type consulStack struct {
	testenv.Stack
	naming translate.Naming
}

func newConsulStack(t *testing.T, ns string) consulStack {
	t.Helper()
	return consulStack{Stack: env.NewGatewayStack(t, ns, "edge", 18080, ns+"-echo")}
}

// secureGateway creates the Gateway "secure" with an HTTPS listener whose certificate
// is the kubernetes.io/tls Secret "tls", and returns that Secret's key pair.
func (s consulStack) secureGateway(t *testing.T) (cert, key []byte) {
	t.Helper()
	cert, key = testenv.SelfSigned(t, "secure.example.com")
	env.Create(t, testenv.TLSSecret(s.Namespace, "tls", cert, key))
	env.Create(t, s.Gateway("secure", testenv.HTTPSListener("https", 18443, gatewayv1.SecretObjectReference{Name: "tls"})))
	return cert, key
}

// entry is the config entry kind/name, nil when there is none.
func (s consulStack) entry(t *testing.T, kind, name string) consulapi.ConfigEntry {
	t.Helper()
	entry, err := env.ConsulEntry(kind, name)
	if err != nil {
		t.Fatalf("read %s %s: %v", kind, name, err)
	}
	return entry
}

func (s consulStack) waitEntry(t *testing.T, kind, name, what string, ok func(consulapi.ConfigEntry) bool) consulapi.ConfigEntry {
	t.Helper()
	var got consulapi.ConfigEntry
	testenv.Eventually(t, 30*time.Second, what, func(context.Context) error {
		got = s.entry(t, kind, name)
		if !ok(got) {
			return fmt.Errorf("%s %s is %+v", kind, name, got)
		}
		return nil
	})
	return got
}

// ownedEntryVersions are the ModifyIndexes of the entries s's controller wrote as
// cluster clusterID.
func (s consulStack) ownedEntryVersions(t *testing.T, clusterID string) testenv.Versions {
	t.Helper()
	v, err := testenv.ConsulEntryVersions(t.Context(), env.ConsulClient, testenv.OwnedBy(string(s.Controller), clusterID))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// gatewayAPIVersions are the resourceVersions of s's Gateway API objects and class.
func (s consulStack) gatewayAPIVersions(t *testing.T) testenv.Versions {
	t.Helper()
	v, err := env.GatewayAPIVersions(t.Context(), s.Namespace, s.Class)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func present(e consulapi.ConfigEntry) bool { return e != nil }
func absent(e consulapi.ConfigEntry) bool  { return e == nil }

func routeHostnames(e consulapi.ConfigEntry) []string {
	if r, ok := e.(*consulapi.HTTPRouteConfigEntry); ok {
		return r.Hostnames
	}
	return nil
}

// gatewayCondition reads one of the conditions of the Gateway name.
func (s consulStack) gatewayCondition(t *testing.T, name, condType string) string {
	t.Helper()
	g, err := env.GatewayClient.GatewayV1().Gateways(s.Namespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return testenv.ConditionReason(g.Status.Conditions, condType)
}

// routeCondition reads one of our conditions on a route's first parent of ours.
func (s consulStack) routeCondition(t *testing.T, name, condType string) string {
	t.Helper()
	r, err := env.GatewayClient.GatewayV1().HTTPRoutes(s.Namespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := testenv.ParentOf(r.Status.Parents, s.Controller); p != nil {
		return testenv.ConditionReason(p.Conditions, condType)
	}
	return ""
}

func TestConsulSyncLifecycle(t *testing.T) {
	s := newConsulStack(t, "cs-life")
	rc := startController(t, s.Controller, controllerOptions{consul: &consulOptions{clusterID: "it", translation: translate.Options{ManageServiceDefaults: true}}})
	env.Create(t, s.Route("web"))
	gwName, routeName, svcName := s.naming.EntryName(s.Namespace, "edge"), s.naming.EntryName(s.Namespace, "web"), s.Namespace+"-echo"

	// 1. The entries appear with ownership meta, and Consul's verdict reaches status.
	gwEntry := s.waitEntry(t, consulapi.APIGateway, gwName, "api-gateway entry written", present)
	route := s.waitEntry(t, consulapi.HTTPRoute, routeName, "http-route entry written", present)
	s.waitEntry(t, consulapi.ServiceDefaults, svcName, "service-defaults written", present)
	for _, e := range []consulapi.ConfigEntry{gwEntry, route} {
		meta := e.GetMeta()
		if meta["gateway-controller"] != string(s.Controller) || meta["gateway-controller-cluster"] != "it" || meta["k8s-namespace"] != s.Namespace || meta["k8s-uid"] == "" {
			t.Errorf("%s %s meta = %v, want our controller, cluster, namespace and a uid", e.GetKind(), e.GetName(), meta)
		}
	}
	testenv.Eventually(t, 30*time.Second, "Consul's verdict reaches the Gateway and the route", func(context.Context) error {
		if got := s.gatewayCondition(t, "edge", "Programmed"); got != "True/Programmed" {
			return fmt.Errorf("Gateway edge Programmed = %q", got)
		}
		if got := s.routeCondition(t, "web", gwsync.ConsulAcceptedCondition); got != "True/Accepted" {
			return fmt.Errorf("route web ConsulAccepted = %q", got)
		}
		return nil
	})

	// 2. A route edit updates exactly its entry: by the controller's count, once it
	// synced the edit and went idle, and by Consul's ModifyIndexes. Consul writes the
	// status of the entries it judges itself (the route's, the Gateway's), so only the
	// service-defaults, which it does not judge, are evidence of no write.
	rc.settled(t, "httproute", "consul")
	before := rc.consulWrites.total()
	indexes := s.ownedEntryVersions(t, "it")
	setHostnames(t, s.Namespace, "web", "web.example.com")
	s.waitEntry(t, consulapi.HTTPRoute, routeName, "http-route entry updated", func(e consulapi.ConfigEntry) bool {
		h := routeHostnames(e)
		return len(h) == 1 && h[0] == "web.example.com"
	})
	rc.settled(t, "httproute", "consul")
	if n := rc.consulWrites.total() - before; n != 1 {
		t.Errorf("the route edit made %d Consul writes, want exactly 1 (its http-route)", n)
	}
	changed := indexes.Changes(s.ownedEntryVersions(t, "it"))
	if !slices.ContainsFunc(changed, func(c string) bool { return strings.HasPrefix(c, "consul "+consulapi.HTTPRoute+"/"+routeName+" ") }) {
		t.Errorf("the route edit left the http-route's ModifyIndex as it was; changes: %v", changed)
	}
	for _, c := range changed {
		if strings.HasPrefix(c, "consul "+consulapi.ServiceDefaults+"/") {
			t.Errorf("the route edit changed another entry: %s", c)
		}
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

	// 5. A restart against a converged system writes nothing: to Consul, and no
	// status. Judged once the restarted controller synced every key and went idle,
	// by its counts and by the servers' own versions: the resourceVersions of the
	// objects it writes status on, the ModifyIndexes of its entries.
	rc.settled(t, "consul")
	versions := s.ownedEntryVersions(t, "it").Merge(s.gatewayAPIVersions(t))
	rc.stop()
	rc2 := startController(t, s.Controller, controllerOptions{consul: &consulOptions{clusterID: "it", translation: translate.Options{ManageServiceDefaults: true}}})
	testenv.Eventually(t, 30*time.Second, "the restarted controller confirms the route", func(context.Context) error {
		if len(rc2.published.of("HTTPRoute", cacheName(s.Namespace, "web"))) == 0 {
			return errors.New("no confirmation of the route yet")
		}
		return nil
	})
	rc2.settled(t, "gatewayclass", "gateway", "httproute", "consul")
	if n := rc2.consulWrites.total(); n != 0 {
		t.Errorf("the restarted controller made %d Consul writes against a converged system, want 0", n)
	}
	if n := rc2.statusWrites.total(); n != 0 {
		t.Errorf("the restarted controller made %d status writes against a converged system, want 0", n)
	}
	if changes := versions.Changes(s.ownedEntryVersions(t, "it").Merge(s.gatewayAPIVersions(t))); len(changes) > 0 {
		t.Errorf("after the restart, by the servers' versions: %s", strings.Join(changes, "; "))
	}
	if got := s.entry(t, consulapi.HTTPRoute, "foreign-route"); got == nil || len(got.GetMeta()) != 0 || !cmp.Equal(got.(*consulapi.HTTPRouteConfigEntry).Rules, foreignRules) {
		t.Errorf("the foreign entry was changed or deleted: %+v", got)
	}

	// 2, continued. A delete removes exactly its entries: the route and the
	// service-defaults only it needed; the Gateway's stays.
	if err := env.GatewayClient.GatewayV1().HTTPRoutes(s.Namespace).Delete(t.Context(), "web", metav1.DeleteOptions{}); err != nil {
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
	routeName := s.naming.EntryName(s.Namespace, "web")
	foreign := &consulapi.HTTPRouteConfigEntry{Kind: consulapi.HTTPRoute, Name: routeName,
		Parents: []consulapi.ResourceReference{{Kind: consulapi.APIGateway, Name: "somebody-elses"}},
		Rules:   []consulapi.HTTPRouteRule{{Services: []consulapi.HTTPService{{Name: "theirs"}}}}}
	if _, _, err := env.ConsulClient.ConfigEntries().Set(consul.Compact(foreign), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = env.ConsulClient.ConfigEntries().Delete(consulapi.HTTPRoute, routeName, nil) })
	// Consul rewrites the entry's status itself; what must not change is its content.
	theirs := s.entry(t, consulapi.HTTPRoute, routeName).(*consulapi.HTTPRouteConfigEntry)

	startController(t, s.Controller, controllerOptions{consul: &consulOptions{clusterID: "it"}})
	env.Create(t, s.Route("web"))
	testenv.Eventually(t, 30*time.Second, "the clash is reported on the route", func(context.Context) error {
		if got := s.routeCondition(t, "web", gwsync.ConsulAcceptedCondition); got != "False/"+consul.ReasonForeignEntry {
			return fmt.Errorf("route web ConsulAccepted = %q", got)
		}
		return nil
	})
	got, ok := s.entry(t, consulapi.HTTPRoute, routeName).(*consulapi.HTTPRouteConfigEntry)
	if !ok || len(got.Meta) != 0 || !cmp.Equal(got.Rules, theirs.Rules) || !cmp.Equal(got.Parents, theirs.Parents) {
		t.Errorf("the foreign entry was changed: %+v", got)
	}
}

func TestConsulSyncCASRace(t *testing.T) {
	s := newConsulStack(t, "cs-race")
	routeName := s.naming.EntryName(s.Namespace, "web")
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
	startController(t, s.Controller, controllerOptions{consul: &consulOptions{clusterID: "it", beforeWrite: beforeWrite}})
	env.Create(t, s.Route("web", "one.example.com"))
	s.waitEntry(t, consulapi.HTTPRoute, routeName, "route written", present)
	setHostnames(t, s.Namespace, "web", "two.example.com")
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
	rc := startController(t, s.Controller, controllerOptions{
		consul:       &consulOptions{clusterID: "it"},
		failStatusOf: []string{s.Namespace + "/unconfirmed"},
	})
	env.Create(t, s.Route("confirmed"))
	env.Create(t, s.Route("unconfirmed"))
	s.waitEntry(t, consulapi.HTTPRoute, s.naming.EntryName(s.Namespace, "confirmed"), "the confirmed route is written", present)
	// Only the unconfirmed route's status writes fail (503): one was attempted, so the
	// route was judged and reached the point of confirmation.
	testenv.Eventually(t, 30*time.Second, "a status write of the unconfirmed route is attempted and fails", func(context.Context) error {
		if rc.statusWrites.count(http.StatusServiceUnavailable) == 0 {
			return errors.New("no failed status write yet")
		}
		return nil
	})
	// The route was judged and its status write refused three times, and the Consul
	// syncer has synced every key it took: a confirmation of the route would have
	// reached Consul by now. Its queue keeps retrying the failing write, so the
	// controller as a whole never goes idle.
	testenv.Eventually(t, 60*time.Second, "three failed status writes, and the Consul syncer's queue drained", func(ctx context.Context) error {
		if n := rc.statusWrites.count(http.StatusServiceUnavailable); n < 3 {
			return fmt.Errorf("%d failed status writes", n)
		}
		text, err := processMetrics(ctx)
		if err != nil {
			return err
		}
		since := func(name string, labels ...string) float64 {
			return testenv.MetricSum(text, name, labels...) - testenv.MetricSum(rc.base, name, labels...)
		}
		adds, syncs := since("workqueue_adds_total", `name="consul"`), since("consul_gateway_controller_sync_duration_seconds_count", `queue="consul"`)
		if depth := since("workqueue_depth", `name="consul"`); adds == 0 || syncs < adds || depth != 0 {
			return fmt.Errorf("queue consul took %v keys, synced %v, holds %v", adds, syncs, depth)
		}
		return nil
	})
	if e := s.entry(t, consulapi.HTTPRoute, s.naming.EntryName(s.Namespace, "unconfirmed")); e != nil {
		t.Errorf("a route whose status the API server never confirmed reached Consul: %+v", e)
	}
}

func TestConsulSyncSurvivesConsulRestartAndOutage(t *testing.T) {
	s := newConsulStack(t, "cs-outage")
	startController(t, s.Controller, controllerOptions{consul: &consulOptions{clusterID: "it"}})
	env.Create(t, s.Route("web", "one.example.com"))
	gwName, routeName := s.naming.EntryName(s.Namespace, "edge"), s.naming.EntryName(s.Namespace, "web")
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
		setHostnames(t, s.Namespace, "web", host)
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
	startController(t, s.Controller, controllerOptions{consul: &consulOptions{clusterID: "it"}})
	cert, _ := s.secureGateway(t)
	entry := s.naming.CertificateName(s.Namespace, "tls")
	s.waitEntry(t, consulapi.InlineCertificate, entry, "the first certificate in Consul", func(e consulapi.ConfigEntry) bool {
		c, ok := e.(*consulapi.InlineCertificateConfigEntry)
		return ok && c.Certificate == string(cert)
	})

	rotated, key, err := testcerts.SelfSigned("secure.example.com")
	if err != nil {
		t.Fatal(err)
	}
	secret, err := env.KubeClient.CoreV1().Secrets(s.Namespace).Get(t.Context(), "tls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secret.Data = map[string][]byte{corev1.TLSCertKey: rotated, corev1.TLSPrivateKeyKey: key}
	if _, err := env.KubeClient.CoreV1().Secrets(s.Namespace).Update(t.Context(), secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitEntry(t, consulapi.InlineCertificate, entry, "the rotated certificate in Consul", func(e consulapi.ConfigEntry) bool {
		c, ok := e.(*consulapi.InlineCertificateConfigEntry)
		return ok && c.Certificate == string(rotated)
	})
}
