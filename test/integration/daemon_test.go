package integration

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// TestDaemon runs the controller binary the way a pod does, at -v=10 over a TLS
// listener: /readyz answers 503 while its caches cannot sync and 200 once they have,
// Events mark transitions, /metrics serves every documented series with the drift and
// garbage collection it did, SIGTERM exits 0 and releases the Lease, and no token or
// key byte reaches the log.
func TestDaemon(t *testing.T) {
	s := newConsulStack(t, "daemon")
	_, key := s.secureGateway(t)
	createObject(t, s.route("web"))
	broken := s.route("broken")
	broken.Spec.Rules[0].BackendRefs[0].Name = "missing"
	createObject(t, broken)

	// The process runs as a ServiceAccount that has no permissions yet.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "controller"}}
	createObject(t, sa)
	tr, err := env.KubeClient.CoreV1().ServiceAccounts(s.ns).CreateToken(t.Context(), sa.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.Kube.WriteTokenKubeconfig(kubeconfig, "controller", tr.Status.Token); err != nil {
		t.Fatal(err)
	}
	consulToken := "daemon-test-consul-token-6b1f0e2c"
	p := startControllerProcess(t, "daemon", processOptions{kubeconfig: kubeconfig, consulToken: consulToken, args: []string{
		"--controller-name=" + string(s.controller), "--cluster-id=daemon", "--manage-service-defaults", "-v=10", "--deploy-gateways=false",
		"--leader-elect-resource-namespace=" + s.ns, "--leader-elect-resource-name=daemon",
	}})

	// Not ready while the caches cannot sync, and saying why.
	eventually(t, 30*time.Second, "/readyz answers", func() (bool, error) {
		if !p.running() {
			return false, fmt.Errorf("the controller exited: %w", p.exitErr)
		}
		return p.readyz() != 0, nil
	})
	for range 3 {
		code, body, err := p.get(p.healthAddr, "/readyz")
		if err != nil || code != http.StatusServiceUnavailable || !strings.Contains(body, "caches") {
			t.Fatalf("/readyz without RBAC = %d %q (%v), want 503 naming the caches", code, body, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	createObject(t, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "daemon-controller"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: s.ns, Name: sa.Name}},
	})
	p.waitReady(90 * time.Second)

	// Converged: the TLS Gateway is programmed, the valid route is in Consul, the
	// broken one says why.
	eventually(t, 60*time.Second, "the example converges", func() (bool, error) {
		g, err := env.GatewayClient.GatewayV1().Gateways(s.ns).Get(t.Context(), "secure", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if got := conditionReason(g.Status.Conditions, "Programmed"); got != "True/Programmed" {
			return false, fmt.Errorf("Gateway secure Programmed = %s", got)
		}
		if got := s.routeCondition(t, "web", "consul-gateway-controller.github.io/ConsulAccepted"); got != "True/Accepted" {
			return false, fmt.Errorf("route web ConsulAccepted = %s", got)
		}
		if got := s.routeCondition(t, "broken", "ResolvedRefs"); got != "False/BackendNotFound" {
			return false, fmt.Errorf("route broken ResolvedRefs = %s", got)
		}
		return true, nil
	})

	// Drift: a hand edit is put back. Garbage collection: a deleted route's entry goes.
	webEntry := s.naming.EntryName(s.ns, "web")
	s.waitEntry(t, consulapi.HTTPRoute, webEntry, "the route's entry written", present)
	edited := s.entry(t, consulapi.HTTPRoute, webEntry).(*consulapi.HTTPRouteConfigEntry)
	edited.Hostnames = []string{"hijacked.example.com"}
	if _, _, err := env.ConsulClient.ConfigEntries().Set(consul.Compact(edited), nil); err != nil {
		t.Fatal(err)
	}
	s.waitEntry(t, consulapi.HTTPRoute, webEntry, "the hand edit put back", func(e consulapi.ConfigEntry) bool {
		return e != nil && len(routeHostnames(e)) == 0
	})
	if err := env.GatewayClient.GatewayV1().HTTPRoutes(s.ns).Delete(t.Context(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitEntry(t, consulapi.HTTPRoute, webEntry, "the deleted route's entry removed", absent)

	// Events: the broken route's rejection, reported by this controller.
	eventually(t, 30*time.Second, "a BackendNotFound Event on the broken route", func() (bool, error) {
		list, err := env.KubeClient.EventsV1().Events(s.ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Regarding.Kind == "HTTPRoute" && e.Regarding.Name == "broken" && e.Reason == "BackendNotFound" &&
				e.Type == corev1.EventTypeWarning && e.ReportingController == string(s.controller) {
				return true, nil
			}
		}
		return false, fmt.Errorf("%d events, none for the broken route", len(list.Items))
	})

	// Every documented series, and the work this run did.
	body, err := p.metrics()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range documentedSeries(t) {
		if !seriesPresent(body, name) {
			t.Errorf("/metrics lacks the documented series %s", name)
		}
	}
	for _, want := range []struct {
		name   string
		labels []string
		min    float64
	}{
		{"consul_gateway_controller_leader", nil, 1},
		{"consul_gateway_controller_status_writes_total", []string{`result="ok"`}, 1},
		{"consul_gateway_controller_consul_writes_total", []string{`operation="create"`, `result="ok"`}, 1},
		{"consul_gateway_controller_consul_drift_corrections_total", []string{`kind="http-route"`}, 1},
		{"consul_gateway_controller_consul_gc_deletions_total", []string{`kind="http-route"`}, 1},
		{"consul_gateway_controller_sync_duration_seconds_count", []string{`queue="httproute"`}, 1},
		{"rest_client_requests_total", []string{`code="403"`}, 1}, // the list attempts before RBAC
		{"workqueue_adds_total", []string{`name="consul"`}, 1},
	} {
		if got := metricSum(body, want.name, want.labels...); got < want.min {
			t.Errorf("%s%v = %v, want at least %v", want.name, want.labels, got, want.min)
		}
	}

	// SIGTERM drains, releases the Lease and exits 0.
	code, err := p.terminate(30 * time.Second)
	if err != nil || code != 0 {
		t.Errorf("after SIGTERM: exit %d, %v; want 0", code, err)
	}
	lease, err := env.KubeClient.CoordinationV1().Leases(s.ns).Get(t.Context(), "daemon", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("the Lease is still held by %q after SIGTERM", *h)
	}

	out := p.output()
	if len(out) < 100000 {
		t.Fatalf("only %d bytes of log at -v=10", len(out))
	}
	keyBody := strings.TrimSpace(strings.Join(strings.Split(string(key), "\n")[1:3], ""))
	for what, secret := range map[string]string{
		"the ServiceAccount token":     tr.Status.Token,
		"the Consul token":             consulToken,
		"the private key (PEM)":        keyBody[:40],
		"the private key (base64)":     base64.StdEncoding.EncodeToString(key)[:40],
		"a PEM private key header":     "PRIVATE KEY",
		"the private key, JSON-quoted": strings.ReplaceAll(string(key[:60]), "\n", `\n`),
	} {
		if strings.Contains(out, secret) {
			t.Errorf("%s appears in the -v=10 log", what)
		}
	}
}

// documentedSeries are the series names in docs/metrics.md's tables, except the Go
// runtime and process families, which the doc describes as a group.
func documentedSeries(t *testing.T) []string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(root, "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	row := regexp.MustCompile("^\\| `([a-z_]+)` \\|")
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := row.FindStringSubmatch(sc.Text()); m != nil {
			names = append(names, m[1])
		}
	}
	if len(names) < 15 {
		t.Fatalf("found only %d series in docs/metrics.md", len(names))
	}
	return names
}

// seriesPresent reports whether the Prometheus text has a sample of the family name.
func seriesPresent(body, name string) bool {
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		for _, suffix := range []string{"", "_bucket", "_count"} {
			if strings.HasPrefix(line, name+suffix+"{") || strings.HasPrefix(line, name+suffix+" ") {
				return true
			}
		}
	}
	return false
}

// metricSum adds up the samples of name that carry every one of labels.
func metricSum(body, name string, labels ...string) float64 {
	var sum float64
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		matches := true
		for _, l := range labels {
			matches = matches && strings.Contains(line, l)
		}
		if !matches {
			continue
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// TestQuietAtV0: at the default verbosity the binary logs its lifecycle and nothing
// while nothing changes.
func TestQuietAtV0(t *testing.T) {
	s := newConsulStack(t, "quiet")
	createObject(t, s.route("web"))
	p := startControllerProcess(t, "quiet", processOptions{args: []string{
		"--controller-name=" + string(s.controller), "--cluster-id=quiet", "--manage-service-defaults", "--deploy-gateways=false",
		"--leader-elect-resource-namespace=" + s.ns,
	}})
	eventually(t, 60*time.Second, "the example converges", func() (bool, error) {
		return s.routeCondition(t, "web", "consul-gateway-controller.github.io/ConsulAccepted") == "True/Accepted", nil
	})
	time.Sleep(2 * time.Second) // the last confirmations settle
	settled := p.output()
	time.Sleep(5 * time.Second)
	if more := strings.TrimPrefix(p.output(), settled); more != "" {
		t.Errorf("at -v=0 in steady state the controller logged:\n%s", more)
	}
	if lines := strings.Count(settled, "\n"); lines > 20 {
		t.Errorf("%d lines at -v=0 to start and converge one route, want a few lifecycle lines:\n%s", lines, settled)
	}
}
