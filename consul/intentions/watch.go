package intentions

import (
	"context"
	"maps"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/klog/v2"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
)

// observeIntentions records the service-intentions entries Consul holds and, once the
// needs are known, queues every destination whose entry is not what they ask: a hand
// edit is put back, and so is an entry Consul lost. A destination whose entry is as
// needed is not queued, so a converged keeper reads and writes nothing.
func (k *Keeper) observeIntentions(ctx context.Context, entries []consulapi.ConfigEntry) {
	listed := make(map[Service]*consulapi.ServiceIntentionsConfigEntry, len(entries))
	for _, e := range entries {
		if entry, ok := e.(*consulapi.ServiceIntentionsConfigEntry); ok {
			listed[NewService(entry.Name, entry.Namespace, entry.Partition)] = entry
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.needs != nil && k.listed != nil && maps.Equal(k.listed, listed) {
		// The same entries (the lister reuses an unchanged one): what they lack was
		// queued when they were first listed. Consul's index moves with any entry
		// written, so at a cold start most answers are these.
		return
	}
	k.listed = listed
	if k.needs == nil {
		k.signal() // the needs may be computed now
		return
	}
	misjudged := k.misjudged()
	if len(misjudged) > 0 {
		klog.FromContext(ctx).V(4).Info("Service intentions in Consul differ from what the routes need", "destinations", len(misjudged))
	}
	k.add(misjudged)
}

// watchWait is how long one blocking list waits for a change.
const watchWait = 10 * time.Second

// watch follows every entry of kind with blocking queries and calls observe with each
// answer whose index moved. After an error, or when the index goes back (Consul lost
// its data), the kind is read again from 0, consistently; retries are paced as the
// syncer's watch paces its own.
func (k *Keeper) watch(ctx context.Context, kind string, observe func(context.Context, []consulapi.ConfigEntry)) {
	logger := klog.FromContext(ctx).WithValues("kind", kind)
	backoff := consul.WatchBackoff()
	// Each write of the keeper's moves the index and brings the whole kind again: at
	// a cold start, one list per destination written. The lister decodes only what
	// changed, and the pause after each answer keeps that to a tenth of a core.
	lister := consul.NewEntryLister(k.cfg.Client, kind)
	var index uint64
	for ctx.Err() == nil {
		start := time.Now()
		q := (&consulapi.QueryOptions{WaitIndex: index, WaitTime: watchWait, Partition: k.cfg.Partition, RequireConsistent: index == 0}).WithContext(ctx)
		if k.cfg.AllNamespaces {
			q.Namespace = "*"
		}
		entries, meta, size, err := lister.List(q)
		if err != nil {
			if ctx.Err() == nil {
				logger.V(2).Info("Watching Consul failed; retrying", "err", err)
				sleep(ctx, backoff.Step())
			}
			index = 0
			continue
		}
		backoff = consul.WatchBackoff()
		if meta.LastIndex < index {
			index = 0
			continue
		}
		if meta.LastIndex != index {
			observe(ctx, entries)
		}
		index = meta.LastIndex
		sleep(ctx, consul.WatchPause(time.Since(start)-meta.RequestTime, size))
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
