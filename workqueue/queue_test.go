package workqueue

import (
	"context"
	"errors"
	"slices"
	gosync "sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/metrics"
)

// histogramCount is how many observations the sync latency histogram holds for
// queue and result.
func histogramCount(t *testing.T, queue, result string) uint64 {
	t.Helper()
	var m dto.Metric
	if err := metrics.SyncDuration.WithLabelValues(queue, result).(prometheus.Histogram).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

func TestProcessNextItem(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "gateways"}, "gw", errors.New("stale"))
	tests := []struct {
		name         string
		err          error
		wantRequeues int
		wantResult   string
	}{
		{"success forgets the key", nil, 0, metrics.ResultOK},
		{"an error requeues with backoff", errors.New("boom"), 1, metrics.ResultError},
		{"a conflict requeues with backoff", conflict, 1, metrics.ResultConflict},
		{"an expected wait requeues with backoff", Expected(errors.New("waits for its dependency")), 1, metrics.ResultError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			queue := New[string]("test")
			defer queue.ShutDown()
			queue.Add("key")
			calls := 0
			more := processNextItem(t.Context(), tt.name, queue, func(_ context.Context, key string) error {
				calls++
				if key != "key" {
					t.Errorf("synced %q, want key", key)
				}
				return tt.err
			})
			if !more || calls != 1 {
				t.Fatalf("processNextItem = %v after %d syncs, want true after 1", more, calls)
			}
			if got := queue.NumRequeues("key"); got != tt.wantRequeues {
				t.Errorf("NumRequeues = %d, want %d", got, tt.wantRequeues)
			}
			if got := histogramCount(t, tt.name, tt.wantResult); got != 1 {
				t.Errorf("sync_duration_seconds{result=%q} counted %d syncs, want 1", tt.wantResult, got)
			}
		})
	}
}

func TestProcessNextItemStopsOnShutdown(t *testing.T) {
	queue := New[string]("test")
	queue.ShutDown()
	if processNextItem(t.Context(), "test", queue, func(context.Context, string) error { return nil }) {
		t.Error("processNextItem kept going on a shut-down queue")
	}
}

// Cancelling Run drains: the keys queued when ctx is cancelled are still synced, and
// Run returns only after them, with the queue shut down.
func TestRunDrainsThenStops(t *testing.T) {
	queue := New[int]("test")
	for i := range 5 {
		queue.Add(i)
	}
	ctx, cancel := context.WithCancel(t.Context())
	started, release := make(chan struct{}), make(chan struct{})
	var mu gosync.Mutex
	var synced []int
	done := make(chan struct{})
	go func() {
		Run(ctx, "test", queue, 1, func(_ context.Context, key int) error {
			if key == 0 {
				close(started)
				<-release
			}
			mu.Lock()
			synced = append(synced, key)
			mu.Unlock()
			return nil
		})
		close(done)
	}()
	// Cancel while the first key is in flight and four are still queued.
	<-started
	cancel()
	if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return queue.ShuttingDown(), nil
	}); err != nil {
		t.Fatal("Run did not shut the queue down after the cancel")
	}
	select {
	case <-done:
		t.Fatal("Run returned while a sync was in flight")
	default:
	}
	close(release)
	<-done
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(synced)
	if !slices.Equal(synced, []int{0, 1, 2, 3, 4}) {
		t.Errorf("synced %v before Run returned, want every key queued at the cancel", synced)
	}
}

func TestExpectedKeepsTheCause(t *testing.T) {
	cause := errors.New("lost a check-and-set race")
	err := Expected(cause)
	if !errors.Is(err, cause) || !errors.Is(err, errExpected) || err.Error() != cause.Error() {
		t.Errorf("Expected(%v) = %v: want it to wrap the cause and the mark, with the cause's message", cause, err)
	}
	if errors.Is(cause, errExpected) {
		t.Error("the cause itself is marked expected")
	}
}
