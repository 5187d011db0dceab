package metrics

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/util/workqueue"
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

func TestEndpoints(t *testing.T) {
	notReady := errors.New("the caches have not synced")
	readiness := notReady
	srv := httptest.NewServer(Handler(func() error { return readiness }, false))
	defer srv.Close()

	if code, _ := get(t, srv.URL+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d, want 200", code)
	}
	if code, _ := get(t, srv.URL+"/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("/debug/pprof/ without profiling = %d, want 404", code)
	}
	if code, body := get(t, srv.URL+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, notReady.Error()) {
		t.Errorf("/readyz before ready = %d %q, want 503 with the reason", code, body)
	}
	readiness = nil
	if code, _ := get(t, srv.URL+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz when ready = %d, want 200", code)
	}

	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "metrics-test"})
	defer queue.ShutDown()
	queue.Add("a")
	StatusWrites.WithLabelValues("Gateway", ResultConflict).Inc()
	ConsulWrites.WithLabelValues("api-gateway", "create", ResultOK).Inc()
	_, body := get(t, srv.URL+"/metrics")
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

func TestProfiling(t *testing.T) {
	srv := httptest.NewServer(Handler(func() error { return nil }, true))
	defer srv.Close()
	if code, body := get(t, srv.URL+"/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("/debug/pprof/ with profiling = %d, want 200 with the profile index", code)
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
