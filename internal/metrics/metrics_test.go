package metrics

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestEndpoints checks that each address serves its own endpoints and nothing else:
// the health checks, /metrics, and the profiles each on their own.
func TestEndpoints(t *testing.T) {
	health := httptest.NewServer(HealthHandler(func() error { return nil }))
	defer health.Close()
	metrics := httptest.NewServer(MetricsHandler(Open))
	defer metrics.Close()
	profiles := httptest.NewServer(ProfilingHandler())
	defer profiles.Close()

	for _, tt := range []struct {
		server *httptest.Server
		path   string
		want   int
	}{
		{health, "/healthz", http.StatusOK},
		{health, "/readyz", http.StatusOK},
		{health, "/metrics", http.StatusNotFound},
		{health, "/debug/pprof/", http.StatusNotFound},
		{metrics, "/metrics", http.StatusOK},
		{metrics, "/healthz", http.StatusNotFound},
		{metrics, "/readyz", http.StatusNotFound},
		{metrics, "/debug/pprof/", http.StatusNotFound},
		{profiles, "/debug/pprof/", http.StatusOK},
		{profiles, "/metrics", http.StatusNotFound},
		{profiles, "/healthz", http.StatusNotFound},
	} {
		if code, _ := get(t, tt.server.URL+tt.path); code != tt.want {
			name := map[*httptest.Server]string{health: "health", metrics: "metrics", profiles: "profiling"}[tt.server]
			t.Errorf("%s on the %s address = %d, want %d", tt.path, name, code, tt.want)
		}
	}
	if code, body := get(t, profiles.URL+"/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("/debug/pprof/ = %d, want 200 with the profile index", code)
	}

	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "metrics-test"})
	defer queue.ShutDown()
	queue.Add("a")
	StatusWrites.WithLabelValues("Gateway", ResultConflict).Inc()
	ConsulWrites.WithLabelValues("api-gateway", "create", ResultOK).Inc()
	_, body := get(t, metrics.URL+"/metrics")
	for _, want := range []string{
		`workqueue_adds_total{name="metrics-test"} 1`,
		`workqueue_depth{name="metrics-test"} 1`,
		`consul_gateway_controller_status_writes_total{kind="Gateway",result="conflict"} 1`,
		`consul_gateway_controller_consul_writes_total{kind="api-gateway",operation="create",result="ok"} 1`,
		`consul_gateway_controller_leader 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestReadyzSaysNoMoreThanItsReason checks that /readyz answers a short fixed reason
// and never an error's text, which goes to the log instead: once at level 0 when the
// reason changes, and on every probe at -v=4.
func TestReadyzSaysNoMoreThanItsReason(t *testing.T) {
	secret := errors.New(`Get "https://consul.internal.example:8501/v1/status/leader": x509: certificate signed by unknown authority`)
	var readiness error
	h := HealthHandler(func() error { return readiness })
	probe := func(v int) (int, string, string) {
		t.Helper()
		var log bytes.Buffer
		logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(v), textlogger.Output(&log)))
		req := httptest.NewRequestWithContext(klog.NewContext(context.Background(), logger), http.MethodGet, "/readyz", nil)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String(), log.String()
	}
	for _, step := range []struct {
		name      string
		readiness error
		v         int
		code      int
		body      string
		logged    []string // "" for nothing logged
	}{
		{"ready at the start", nil, 0, 200, "ok\n", nil},
		{"caches not synced", NotReady("the caches have not synced", nil), 0, 503, "not ready: the caches have not synced\n", []string{`"Not ready" answer="not ready: the caches have not synced"`}},
		{"the same again", NotReady("the caches have not synced", nil), 0, 503, "not ready: the caches have not synced\n", nil},
		{"consul fails", NotReady("consul does not answer", secret), 0, 503, "not ready: consul does not answer\n", []string{"Not ready", "x509: certificate signed by unknown authority"}},
		{"consul fails again", NotReady("consul does not answer", secret), 0, 503, "not ready: consul does not answer\n", nil},
		{"consul fails again, at -v=4", NotReady("consul does not answer", secret), 4, 503, "not ready: consul does not answer\n", []string{"Readiness probe answered", "x509: certificate signed by unknown authority"}},
		{"any other error", secret, 0, 503, "not ready\n", []string{"Not ready", "x509"}},
		{"ready again", nil, 0, 200, "ok\n", []string{`"Ready"`}},
	} {
		readiness = step.readiness
		code, body, log := probe(step.v)
		if code != step.code || body != step.body {
			t.Errorf("%s: /readyz = %d %q, want %d %q", step.name, code, body, step.code, step.body)
		}
		if len(step.logged) == 0 && log != "" {
			t.Errorf("%s: logged %q, want nothing", step.name, log)
		}
		for _, want := range step.logged {
			if !strings.Contains(log, want) {
				t.Errorf("%s: the log lacks %q:\n%s", step.name, want, log)
			}
		}
	}
}

// TestMetricsAreDocumented keeps docs/metrics.md and the registry in step.
func TestMetricsAreDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	// A vector appears once it has a child; touch each so all are gathered.
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "doc-test"})
	queue.AddRateLimited("a")
	queue.ShutDown()
	StatusWrites.WithLabelValues("x", ResultOK)
	ConsulWrites.WithLabelValues("x", "create", ResultOK)
	DriftCorrections.WithLabelValues("x")
	GCDeletions.WithLabelValues("x")
	SyncDuration.WithLabelValues("x", ResultOK)
	ConsulRequestDuration.WithLabelValues("read")
	restRequests.WithLabelValues("200", "GET", "x")
	restLatency.WithLabelValues("GET", "x")
	SetObjectConditions(func() map[ObjectCondition]int {
		return map[ObjectCondition]int{{"Gateway", "Accepted", "True", "Accepted"}: 1}
	})
	defer SetObjectConditions(nil)
	families, err := Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range families {
		name := f.GetName()
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			continue
		}
		seen++
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("%s is not documented in docs/metrics.md", name)
		}
	}
	if seen < 10 {
		t.Errorf("only %d of the controller's series were gathered", seen)
	}
}
