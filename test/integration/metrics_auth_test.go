package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// TestMetricsAuth runs the controller binary with /metrics behind its delegated
// authentication and authorization (--metrics-auth=kubernetes, as deploy/ runs it)
// and --profiling, at -v=10, and checks what each of its addresses answers: /metrics
// 200 to a ServiceAccount bound to a copy of deploy/'s metrics-reader ClusterRole, 403
// to one without it, 401 without a token or with one the API server rejects, and a
// dozen scrapes cost at most the one pair of reviews; the health checks only on the
// health address, pprof only on the profiling address; no token in the log. A
// non-loopback profiling address is refused at start.
func TestMetricsAuth(t *testing.T) {
	r := renderDeploy(t)
	const ns = "metrics-auth"
	ensureNamespace(t, ns)
	reader := metricsReaderRole(t, r, "metrics-auth-reader")
	readerToken := metricsScraper(t, ns, "reader", reader)
	strangerToken := metricsScraper(t, ns, "stranger", "")

	p := env.RunController(t, testenv.ControllerOptions{Name: "metrics-auth", MetricsToken: readerToken, Args: []string{
		"--controller-name=example.com/metrics-auth", "--cluster-id=metrics-auth", "--deploy-gateways=false",
		"--leader-elect=false", "--profiling", "-v=10",
	}})
	if err := p.WaitReady(t.Context(), 60*time.Second); err != nil {
		t.Fatal(err)
	}
	metricsURL := "http://" + p.MetricsAddr() + "/metrics"
	for _, c := range []struct {
		who   string
		token string
		want  int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a token the API server rejects", "not-a-kubernetes-token", http.StatusUnauthorized},
		{"a ServiceAccount without the grant", strangerToken, http.StatusForbidden},
		{"a ServiceAccount bound to metrics-reader", readerToken, http.StatusOK},
	} {
		code, body, err := testenv.HTTPGet(t.Context(), metricsURL, c.token)
		switch {
		case err != nil:
			t.Errorf("/metrics with %s: %v", c.who, err)
		case code != c.want:
			t.Errorf("/metrics with %s = %d, want %d: %.200s", c.who, code, c.want, body)
		case code == http.StatusOK && !strings.Contains(body, "consul_gateway_controller_leader 1"):
			t.Errorf("/metrics with %s lacks the leader series: %.200s", c.who, body)
		case code != http.StatusOK && strings.TrimSpace(body) != http.StatusText(code):
			t.Errorf("/metrics with %s answered %q: a refusal says its status and nothing else", c.who, body)
		}
	}

	// The reader's decision is cached: a dozen scrapes cost at most the pair of
	// reviews (POSTs answered 201) that its expiry in the middle would cost, not two
	// per scrape. Without leader election, Gateways or Events, the reviews are this
	// process's only POSTs.
	posts := func() float64 {
		t.Helper()
		body, err := p.Metrics(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return testenv.MetricSum(body, "rest_client_requests_total", `code="201"`, `method="POST"`)
	}
	before := posts()
	// The scrapes above were reviewed: with no review counted, a flat count below
	// would say nothing of caching.
	if before < 2 {
		t.Fatalf("the scrapes above made %v POSTs (reviews), want at least the first token's pair: the count does not see reviews", before)
	}
	for range 10 {
		posts()
	}
	if after := posts(); after-before > 2 {
		t.Errorf("12 scrapes with one token made %v POSTs to the API server, want at most 2: the decision is not cached", after-before)
	}

	// Each address serves its own endpoints only.
	for _, c := range []struct {
		addr, path, token string
		want              int
	}{
		{p.HealthAddr(), "/healthz", "", http.StatusOK},
		{p.HealthAddr(), "/readyz", "", http.StatusOK},
		{p.HealthAddr(), "/metrics", readerToken, http.StatusNotFound},
		{p.HealthAddr(), "/debug/pprof/", "", http.StatusNotFound},
		{p.MetricsAddr(), "/debug/pprof/", readerToken, http.StatusNotFound},
		{p.MetricsAddr(), "/debug/pprof/", "", http.StatusNotFound},
		{p.MetricsAddr(), "/readyz", readerToken, http.StatusNotFound},
		{p.MetricsAddr(), "/healthz", "", http.StatusNotFound},
		{p.ProfilingAddr(), "/debug/pprof/", "", http.StatusOK},
		{p.ProfilingAddr(), "/metrics", readerToken, http.StatusNotFound},
	} {
		code, body, err := testenv.HTTPGet(t.Context(), "http://"+c.addr+c.path, c.token)
		if err != nil || code != c.want {
			t.Errorf("%s%s = %d (%v), want %d", c.addr, c.path, code, err, c.want)
		}
		if c.want == http.StatusOK && c.path == "/debug/pprof/" && !strings.Contains(body, "goroutine") {
			t.Errorf("%s%s is not pprof's index: %.200s", c.addr, c.path, body)
		}
	}

	log := p.Output()
	for what, token := range map[string]string{"the reader's token": readerToken, "the stranger's token": strangerToken} {
		if strings.Contains(log, token) {
			t.Errorf("%s appears in the -v=10 log", what)
		}
	}
	if !strings.Contains(log, "Refused a request") || !strings.Contains(log, "Allowed a request") {
		t.Errorf("the -v=10 log does not show the decisions:\n%s", testenv.Tail(log, 30))
	}

	t.Run("a non-loopback profiling address is refused at start", func(t *testing.T) {
		q := env.RunController(t, testenv.ControllerOptions{Name: "metrics-auth-pprof", Args: []string{
			"--controller-name=example.com/metrics-auth", "--profiling", "--profiling-bind-address=:0",
		}})
		code, err := q.Wait(30 * time.Second)
		if err != nil || code != 2 || !strings.Contains(q.Output(), "not a loopback address") {
			t.Errorf("exit %d (%v), want 2 naming the address:\n%s", code, err, testenv.Tail(q.Output(), 10))
		}
	})
}

// metricsReaderRole creates a copy of deploy/'s metrics-reader ClusterRole named name,
// deleted when t ends, and returns its name.
func metricsReaderRole(t *testing.T, r renderedDeploy, name string) string {
	t.Helper()
	env.Create(t, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: r.metricsReader.Rules})
	return name
}

// metricsScraper creates the ServiceAccount namespace/name, bound to the ClusterRole
// role unless role is empty (the binding is deleted when t ends), waits until RBAC
// answers for it as bound, and returns a token of it.
func metricsScraper(t *testing.T, namespace, name, role string) string {
	t.Helper()
	env.Create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}})
	if role != "" {
		env.Create(t, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: namespace + "-" + name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
		})
	}
	// The controller caches a refusal for 10 s: the grant must be in force before
	// the first scrape.
	user := serviceaccountUser(namespace, name)
	testenv.Eventually(t, 10*time.Second, "RBAC answers for "+user+" on get /metrics", func(ctx context.Context) error {
		sar, err := env.KubeClient.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if sar.Status.Allowed != (role != "") {
			return fmt.Errorf("allowed=%v: %s", sar.Status.Allowed, sar.Status.Reason)
		}
		return nil
	})
	token, err := env.ServiceAccountToken(t.Context(), namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	return token
}
