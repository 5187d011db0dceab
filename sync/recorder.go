package sync

import (
	"context"
	gosync "sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/lru"
)

// Event rate limit per object: a burst for a change that touches several conditions at
// once, then one every eventInterval. A condition that flaps (Consul's verdict going
// back and forth) cannot flood the API server; its status still says the truth.
const (
	eventBurst    = 10
	eventInterval = time.Minute
	// eventLimiters bounds the memory of the limiters; the least recently used object
	// starts afresh when evicted.
	eventLimiters = 4096
)

// eventEmitter turns status transitions into Events through client-go's recorder,
// rate-limited per object.
type eventEmitter struct {
	recorder events.EventRecorder
	mu       gosync.Mutex
	limiters *lru.Cache
}

func newEventEmitter(recorder events.EventRecorder) *eventEmitter {
	return &eventEmitter{recorder: recorder, limiters: lru.New(eventLimiters)}
}

// emit records evs on obj, dropping what exceeds the object's rate.
func (e *eventEmitter) emit(ctx context.Context, obj runtime.Object, evs []statusEvent) {
	if e == nil || e.recorder == nil || len(evs) == 0 {
		return
	}
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	limiter := e.limiter(accessor.GetUID())
	for _, ev := range evs {
		if !limiter.Allow() {
			klog.FromContext(ctx).V(4).Info("Event dropped by the rate limit", "object", klog.KObj(accessor), "reason", ev.Reason)
			continue
		}
		e.recorder.Eventf(obj, nil, ev.Type, ev.Reason, ev.Action, "%s", ev.Note)
	}
}

func (e *eventEmitter) limiter(uid types.UID) *rate.Limiter {
	e.mu.Lock()
	defer e.mu.Unlock()
	if l, ok := e.limiters.Get(uid); ok {
		return l.(*rate.Limiter)
	}
	l := rate.NewLimiter(rate.Every(eventInterval), eventBurst)
	e.limiters.Add(uid, l)
	return l
}
