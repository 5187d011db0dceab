package workqueue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kworkqueue "k8s.io/client-go/util/workqueue"
)

// recordingQueue records what is added to it, and when.
type recordingQueue struct {
	kworkqueue.TypedDelayingInterface[string]
	added []Requeue[string]
}

func (q *recordingQueue) Add(key string) { q.added = append(q.added, Requeue[string]{Key: key}) }

func (q *recordingQueue) AddAfter(key string, after time.Duration) {
	q.added = append(q.added, Requeue[string]{Key: key, After: after})
}

// The keys a sync returns are queued as it asked, with or without its error, and its
// error reaches the retry policy unchanged.
func TestRequeuing(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name     string
		requeues []Requeue[string]
		err      error
	}{
		{name: "nothing to queue"},
		{name: "now and later", requeues: []Requeue[string]{{Key: "other"}, {Key: "key", After: 10 * time.Second}}},
		{name: "queued with the error too", requeues: []Requeue[string]{{Key: "key", After: time.Second}}, err: boom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &recordingQueue{}
			sync := Requeuing(q, func(_ context.Context, key string) ([]Requeue[string], error) {
				if key != "key" {
					t.Errorf("synced %q, want key", key)
				}
				return tc.requeues, tc.err
			})
			if err := sync(t.Context(), "key"); !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
				t.Errorf("sync = %v, want %v", err, tc.err)
			}
			if diff := cmp.Diff(tc.requeues, q.added); diff != "" {
				t.Errorf("queued (-want +got):\n%s", diff)
			}
		})
	}
}
