package cli

import (
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/testcerts"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
)

// certificateReport reads the public certificate of an inline-certificate entry: its
// subject, SANs and validity, and says whether it has expired or expires soon.
func TestCertificateReport(t *testing.T) {
	certPEM, _, err := testcerts.SelfSignedNamed("shop", "shop.example.com", "www.shop.example.com")
	if err != nil {
		t.Fatal(err)
	}
	issued := time.Now()
	for _, tc := range []struct {
		name  string
		pem   string
		now   time.Time
		state string
	}{
		{"within its last month", string(certPEM), issued, "expiring soon: in 24h"},
		{"after notAfter", string(certPEM), issued.Add(48 * time.Hour), "expired"},
		{"before notBefore", string(certPEM), issued.Add(-time.Hour), "not yet valid"},
		{"no PEM", "not a certificate", issued, "Consul's entry holds no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := certificateReport("shop/tls", "secret.tls.shop", tc.pem, tc.now)
			if got.State != tc.state {
				t.Errorf("state %q, want %q", got.State, tc.state)
			}
			if tc.pem != string(certPEM) {
				return
			}
			if got.Subject != "CN=shop" || !gocmp.Equal(got.SANs, []string{"shop.example.com", "www.shop.example.com"}) {
				t.Errorf("subject %q, SANs %q: want CN=shop and both hosts", got.Subject, got.SANs)
			}
			if got.NotAfter.Sub(got.NotBefore) < 24*time.Hour {
				t.Errorf("validity %s to %s: want the certificate's day", got.NotBefore, got.NotAfter)
			}
		})
	}
}

// intentionWhy names the source of a service-intentions entry that lets the gateway
// reach a backend or keeps it out, and says "why 403" when none does.
func TestIntentionWhy(t *testing.T) {
	denied, allowed := false, true
	entry := func(sources ...*consulapi.SourceIntention) *consulapi.ServiceIntentionsConfigEntry {
		return &consulapi.ServiceIntentionsConfigEntry{Kind: consulapi.ServiceIntentions, Name: "web", Sources: sources}
	}
	for _, tc := range []struct {
		name    string
		entry   *consulapi.ServiceIntentionsConfigEntry
		allowed *bool
		want    string
	}{
		{"no entry", nil, &denied, "missing: no service-intentions source names the gateway or *, and Consul's default refuses it (ACLs default deny): the backend's sidecar answers the gateway's requests HTTP 403 (RBAC: access denied)"},
		{"another source only", entry(&consulapi.SourceIntention{Name: "frontend", Action: consulapi.IntentionActionAllow}), &denied, "missing: no service-intentions source names the gateway or *, and Consul's default refuses it"},
		{"allowed", entry(&consulapi.SourceIntention{Name: "edge.shop", Action: consulapi.IntentionActionAllow}), &allowed, `source "edge.shop" of the service-intentions entry: allow`},
		{"denied", entry(&consulapi.SourceIntention{Name: "edge.shop", Action: consulapi.IntentionActionDeny}), &denied, `source "edge.shop" of the service-intentions entry: deny; the backend's sidecar refuses the gateway's requests (HTTP 403, RBAC: access denied)`},
		{"wildcard", entry(&consulapi.SourceIntention{Name: "*", Action: consulapi.IntentionActionAllow}), &allowed, `source "*" of the service-intentions entry: allow`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := intentionWhy(tc.entry, "edge.shop", tc.allowed); !strings.HasPrefix(got, tc.want) {
				t.Errorf("got %q, want it to start with %q", got, tc.want)
			}
		})
	}
}

// listenerReports lists each listener with its status and the routes whose status,
// of this controller, says they are attached to it (all listeners when the
// parentRef names none).
func TestListenerReports(t *testing.T) {
	host := gatewayv1.Hostname("shop.example.com")
	gw := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "edge"},
		Spec: gatewayv1.GatewaySpec{Listeners: []gatewayv1.Listener{
			{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType},
			{Name: "https", Port: 443, Protocol: gatewayv1.HTTPSProtocolType, Hostname: &host, TLS: &gatewayv1.ListenerTLSConfig{
				CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "tls"}},
			}},
		}},
		Status: gatewayv1.GatewayStatus{Listeners: []gatewayv1.ListenerStatus{
			{Name: "http", AttachedRoutes: 2, Conditions: []metav1.Condition{{Type: "Programmed", Status: metav1.ConditionTrue, Reason: "Programmed"}}},
			{Name: "https", AttachedRoutes: 1},
		}},
	}
	accepted := []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue}}
	parent := func(section string) gatewayv1.RouteParentStatus {
		p := gatewayv1.RouteParentStatus{ControllerName: gwsync.DefaultControllerName, ParentRef: gatewayv1.ParentReference{Name: "edge"}, Conditions: accepted}
		if section != "" {
			p.ParentRef.SectionName = new(gatewayv1.SectionName(section))
		}
		return p
	}
	routes := []listedRoute{
		{kind: "HTTPRoute", namespace: "shop", name: "both", parents: []gatewayv1.RouteParentStatus{parent("")}},
		{kind: "HTTPRoute", namespace: "shop", name: "plain", parents: []gatewayv1.RouteParentStatus{parent("http")}},
		{kind: "HTTPRoute", namespace: "shop", name: "others", parents: []gatewayv1.RouteParentStatus{{ControllerName: "someone/else", ParentRef: gatewayv1.ParentReference{Name: "edge"}, Conditions: accepted}}},
	}
	got := listenerReports(gw, routes, gwsync.DefaultControllerName)
	want := []ListenerReport{
		{Name: "http", Port: 80, Protocol: "HTTP", AttachedRoutes: 2, Routes: []string{"HTTPRoute shop/both", "HTTPRoute shop/plain"},
			Conditions: []Condition{{Type: "Programmed", Status: "True", Reason: "Programmed"}}},
		{Name: "https", Port: 443, Protocol: "HTTPS", Hostname: "shop.example.com", AttachedRoutes: 1, Routes: []string{"HTTPRoute shop/both"},
			Conditions: []Condition{}, Certificates: []CertificateReport{{Secret: "shop/tls", State: "not in Consul"}}},
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("listeners (-want +got):\n%s", diff)
	}
}

// podReport says why a gateway pod is not Ready in the words of the Gateway's status.
func TestPodReport(t *testing.T) {
	unscheduled := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "edge-1"},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available: 3 Insufficient cpu."},
		}},
	}
	ready := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "edge-2"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	if got := podReport(unscheduled); got.Ready || !strings.Contains(got.Problem, "Unschedulable") || !strings.Contains(got.Problem, "Insufficient cpu") {
		t.Errorf("unscheduled pod: %+v, want not Ready with the scheduler's reason", got)
	}
	if got := podReport(ready); !got.Ready || got.Problem != "" {
		t.Errorf("ready pod: %+v, want Ready without a problem", got)
	}
}
