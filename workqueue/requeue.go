package workqueue

import (
	"context"
	"time"

	kworkqueue "k8s.io/client-go/util/workqueue"
)

// Requeue is a key a sync decided must be synced again, After from when it returns
// (now when After is 0): a look again at something no event will report. A sync
// returns it instead of queueing it in passing, so what it decided shows in its
// result and the worker loop is the one place that queues.
type Requeue[T comparable] struct {
	Key   T
	After time.Duration
}

// RequeuingSyncFunc handles one key like a SyncFunc, and returns the keys to queue
// again, whatever its error.
type RequeuingSyncFunc[T comparable] func(ctx context.Context, key T) ([]Requeue[T], error)

// Requeuing is sync as a SyncFunc for Run: it queues what sync returns on queue, before
// the worker marks the key done, and returns sync's error for the retry policy.
func Requeuing[T comparable](queue kworkqueue.TypedDelayingInterface[T], sync RequeuingSyncFunc[T]) SyncFunc[T] {
	return func(ctx context.Context, key T) error {
		requeues, err := sync(ctx, key)
		for _, r := range requeues {
			if r.After > 0 {
				queue.AddAfter(r.Key, r.After)
				continue
			}
			queue.Add(r.Key)
		}
		return err
	}
}
