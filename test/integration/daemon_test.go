package integration

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
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
	env.Create(t, s.Route("web"))
	broken := s.Route("broken")
	broken.Spec.Rules[0].BackendRefs[0].Name = "missing"
	env.Create(t, broken)

	// The process runs as a ServiceAccount that has no permissions yet.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: "controller"}}
	env.Create(t, sa)
	kubeconfig, saToken := serviceAccountKubeconfig(t, s.Namespace, sa.Name, nil)
	consulToken := "daemon-test-consul-token-6b1f0e2c"
	p := env.RunController(t, testenv.ControllerOptions{Name: "daemon", Kubeconfig: kubeconfig, ConsulToken: consulToken, Args: []string{
		"--controller-name=" + string(s.Controller), "--cluster-id=daemon", "--manage-service-defaults", "-v=10", "--deploy-gateways=false",
		"--leader-elect-resource-namespace=" + s.Namespace, "--leader-elect-resource-name=daemon",
	}})

	// Not ready while the caches cannot sync, and saying why.
	testenv.Eventually(t, 30*time.Second, "/readyz answers", func(ctx context.Context) error {
		if !p.Running() {
			return fmt.Errorf("the controller exited: %w", p.ExitError())
		}
		_, _, err := p.Readyz(ctx)
		return err
	})
	for range 3 {
		code, body, err := p.Readyz(t.Context())
		if err != nil || code != http.StatusServiceUnavailable || !strings.Contains(body, "caches") {
			t.Fatalf("/readyz without RBAC = %d %q (%v), want 503 naming the caches", code, body, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	env.Create(t, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "daemon-controller"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: s.Namespace, Name: sa.Name}},
	})
	if err := p.WaitReady(t.Context(), 90*time.Second); err != nil {
		t.Fatal(err)
	}

	// Converged: the TLS Gateway is programmed, the valid route is in Consul, the
	// broken one says why.
	testenv.Eventually(t, 60*time.Second, "the example converges", func(context.Context) error {
		if got := s.gatewayCondition(t, "secure", "Programmed"); got != "True/Programmed" {
			return fmt.Errorf("Gateway secure Programmed = %s", got)
		}
		if got := s.routeCondition(t, "web", gwsync.ConsulAcceptedCondition); got != "True/Accepted" {
			return fmt.Errorf("route web ConsulAccepted = %s", got)
		}
		if got := s.routeCondition(t, "broken", "ResolvedRefs"); got != "False/BackendNotFound" {
			return fmt.Errorf("route broken ResolvedRefs = %s", got)
		}
		return nil
	})

	// Drift: a hand edit is put back. Garbage collection: a deleted route's entry goes.
	webEntry := s.naming.EntryName(s.Namespace, "web")
	s.waitEntry(t, consulapi.HTTPRoute, webEntry, "the route's entry written", present)
	edited := s.entry(t, consulapi.HTTPRoute, webEntry).(*consulapi.HTTPRouteConfigEntry)
	edited.Hostnames = []string{"hijacked.example.com"}
	if _, _, err := env.ConsulClient.ConfigEntries().Set(consul.Compact(edited), nil); err != nil {
		t.Fatal(err)
	}
	s.waitEntry(t, consulapi.HTTPRoute, webEntry, "the hand edit put back", func(e consulapi.ConfigEntry) bool {
		return e != nil && len(routeHostnames(e)) == 0
	})
	if err := env.GatewayClient.GatewayV1().HTTPRoutes(s.Namespace).Delete(t.Context(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitEntry(t, consulapi.HTTPRoute, webEntry, "the deleted route's entry removed", absent)

	// Events: the broken route's rejection, reported by this controller.
	testenv.Eventually(t, 30*time.Second, "a BackendNotFound Event on the broken route", func(context.Context) error {
		list, err := env.KubeClient.EventsV1().Events(s.Namespace).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Kind == "HTTPRoute" && e.Regarding.Name == "broken" && e.Reason == "BackendNotFound" &&
				e.Type == corev1.EventTypeWarning && e.ReportingController == string(s.Controller) {
				return nil
			}
		}
		return fmt.Errorf("%d events, none for the broken route", len(list.Items))
	})

	// Every documented series, and the work this run did.
	body, err := p.Metrics(t.Context())
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
		if got := testenv.MetricSum(body, want.name, want.labels...); got < want.min {
			t.Errorf("%s%v = %v, want at least %v", want.name, want.labels, got, want.min)
		}
	}

	// SIGTERM drains, releases the Lease and exits 0.
	code, err := p.Terminate(30 * time.Second)
	if err != nil || code != 0 {
		t.Errorf("after SIGTERM: exit %d, %v; want 0", code, err)
	}
	lease, err := env.KubeClient.CoordinationV1().Leases(s.Namespace).Get(t.Context(), "daemon", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("the Lease is still held by %q after SIGTERM", *h)
	}

	out := p.Output()
	if len(out) < 100000 {
		t.Fatalf("only %d bytes of log at -v=10", len(out))
	}
	assertNoSecrets(t, out, key, map[string]string{"the ServiceAccount token": saToken, "the Consul token": consulToken})
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

// TestQuietAtV0: at the default verbosity the binary logs its lifecycle and nothing
// while nothing changes.
func TestQuietAtV0(t *testing.T) {
	s := newConsulStack(t, "quiet")
	env.Create(t, s.Route("web"))
	p := env.RunController(t, testenv.ControllerOptions{Name: "quiet", Args: []string{
		"--controller-name=" + string(s.Controller), "--cluster-id=quiet", "--manage-service-defaults", "--deploy-gateways=false",
		"--leader-elect-resource-namespace=" + s.Namespace,
	}})
	testenv.Eventually(t, 60*time.Second, "the example converges", func(context.Context) error {
		if got := s.routeCondition(t, "web", gwsync.ConsulAcceptedCondition); got != "True/Accepted" {
			return fmt.Errorf("route web ConsulAccepted = %q", got)
		}
		return nil
	})
	testenv.Settled(t, p, "httproute", "consul")
	settled := p.Output()
	// Steady state, measured in the leader's own work rather than a sleep: two
	// renewals of its Lease, as the API server records them.
	renewals := leaseRenewals(t, s.Namespace)
	testenv.Eventually(t, 60*time.Second, "two renewals of the leader's Lease", func(ctx context.Context) error {
		if n := renewals(ctx); n < 2 {
			return fmt.Errorf("%d renewals", n)
		}
		return nil
	})
	if more := strings.TrimPrefix(p.Output(), settled); more != "" {
		t.Errorf("at -v=0 in steady state the controller logged:\n%s", more)
	}
	if lines := strings.Count(settled, "\n"); lines > 20 {
		t.Errorf("%d lines at -v=0 to start and converge one route, want a few lifecycle lines:\n%s", lines, settled)
	}
	checkBuildNamed(t, p, settled)
}

// checkBuildNamed: the binary built from this checkout names its commit in its
// start-up line, its build_info metric and its version command.
func checkBuildNamed(t *testing.T, p *testenv.Controller, log string) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	checkout, err := testenv.ReadCheckout(root)
	if err != nil {
		t.Fatal(err)
	}
	commit := checkout.Commit[:12]
	if !regexp.MustCompile(`"Starting consul-gateway-controller" version="[^"]+" revision="` + commit).MatchString(log) {
		t.Errorf("no start-up line naming revision %s in:\n%s", commit, log)
	}
	body, err := p.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n := testenv.MetricSum(body, "consul_gateway_controller_build_info", `revision="`+commit); n != 1 {
		t.Errorf("consul_gateway_controller_build_info with revision %s = %v, want 1", commit, n)
	}
	out, err := exec.Command(testenv.ControllerBinary(t), "version").Output()
	if err != nil || !strings.Contains(string(out), "(commit "+commit) {
		t.Errorf("version printed %q (%v), want it to name commit %s", out, err, commit)
	}
}

// leaseRenewals returns a function that counts the renewals of the one Lease in ns
// seen since leaseRenewals was called, by its renewTime on the API server.
func leaseRenewals(t *testing.T, ns string) func(context.Context) int {
	t.Helper()
	renewTime := func(ctx context.Context) (string, error) {
		leases, err := env.KubeClient.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		if len(leases.Items) != 1 || leases.Items[0].Spec.RenewTime == nil {
			return "", fmt.Errorf("%d Leases in %s, want one that was renewed", len(leases.Items), ns)
		}
		return leases.Items[0].Spec.RenewTime.String(), nil
	}
	last, err := renewTime(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	return func(ctx context.Context) int {
		if now, err := renewTime(ctx); err == nil && now != last {
			last = now
			seen++
		}
		return seen
	}
}

// Without --cluster-id the binary names its cluster after the kube-system Namespace's
// UID, so two clusters sharing a Consul never own each other's entries by default.
func TestClusterIDDerived(t *testing.T) {
	s := newConsulStack(t, "clusterid")
	env.Create(t, s.Route("web"))
	kubeSystem, err := env.KubeClient.CoreV1().Namespaces().Get(t.Context(), metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := "k8s-" + string(kubeSystem.UID)
	p := env.RunController(t, testenv.ControllerOptions{Name: "clusterid", Args: []string{
		"--controller-name=" + string(s.Controller), "--deploy-gateways=false",
		"--leader-elect-resource-namespace=" + s.Namespace,
	}})
	route := s.waitEntry(t, consulapi.HTTPRoute, s.naming.EntryName(s.Namespace, "web"), "http-route entry written", present)
	if got := route.GetMeta()["gateway-controller-cluster"]; got != want {
		t.Errorf("entry written for cluster %q, want %q (kube-system's UID)", got, want)
	}
	if !strings.Contains(p.Output(), `"Derived the cluster ID from the kube-system Namespace" clusterID="`+want+`"`) {
		t.Errorf("the derived cluster ID is not logged:\n%s", p.Output())
	}
}
