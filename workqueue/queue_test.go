package workqueue

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestProcessNextItem(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "gateways"}, "gw", errors.New("stale"))
	tests := []struct {
		name         string
		err          error
		wantRequeues int
	}{
		{"success forgets the key", nil, 0},
		{"an error requeues with backoff", errors.New("boom"), 1},
		{"a conflict requeues with backoff", conflict, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			queue := New[string]("test")
			defer queue.ShutDown()
			queue.Add("key")
			calls := 0
			more := processNextItem(t.Context(), queue, func(_ context.Context, key string) error {
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
		})
	}
}

func TestProcessNextItemStopsOnShutdown(t *testing.T) {
	queue := New[string]("test")
	queue.ShutDown()
	if processNextItem(t.Context(), queue, func(context.Context, string) error { return nil }) {
		t.Error("processNextItem kept going on a shut-down queue")
	}
}

func TestRunDrainsThenStops(t *testing.T) {
	queue := New[int]("test")
	synced := make(chan int, 10)
	for i := range 5 {
		queue.Add(i)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		Run(ctx, queue, 2, func(_ context.Context, key int) error {
			synced <- key
			return nil
		})
		close(done)
	}()
	seen := map[int]bool{}
	for len(seen) < 5 {
		seen[<-synced] = true
	}
	cancel()
	<-done
	if !queue.ShuttingDown() {
		t.Error("Run returned without shutting the queue down")
	}
}
