package workqueue

import (
	"context"
	"errors"
	"fmt"
	gosync "sync"
	"time"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	kworkqueue "k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/metrics"
)

// Retry policy, the same for every queue: a key whose sync fails is retried with
// per-key exponential backoff from baseDelay, doubling up to maxDelay, for as long as it
// keeps failing; a change is never dropped. A token bucket per tenant (the Kubernetes
// namespace of an object's key; one shared bucket for keys of other types) caps the
// retries of that tenant's keys, so that an outage does not turn into a retry storm
// and one tenant's thousands of failing objects do not hold back another's retries
// (BenchmarkRetryDelayAcrossTenants). A success resets the key's backoff.
const (
	baseDelay   = 5 * time.Millisecond
	maxDelay    = 5 * time.Minute
	bucketQPS   = 10
	bucketBurst = 100
)

// NewRateLimiter returns the retry policy above for keys of type T.
func NewRateLimiter[T comparable]() kworkqueue.TypedRateLimiter[T] {
	return kworkqueue.NewTypedMaxOfRateLimiter(
		kworkqueue.NewTypedItemExponentialFailureRateLimiter[T](baseDelay, maxDelay),
		newTenantBuckets[T](),
	)
}

// tenantBuckets is a token bucket per tenant of the keys it is given.
type tenantBuckets[T comparable] struct {
	now     func() time.Time
	mu      gosync.Mutex
	buckets map[string]*rate.Limiter
}

func newTenantBuckets[T comparable]() *tenantBuckets[T] {
	return &tenantBuckets[T]{now: time.Now, buckets: map[string]*rate.Limiter{}}
}

// bucketsKept is how many buckets are kept before full ones (of tenants without
// recent retries, deleted namespaces among them) are dropped: a dropped bucket is
// made again full, which is what it held.
const bucketsKept = 1024

func (l *tenantBuckets[T]) When(item T) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	tenant := tenantOf(item)
	bucket, ok := l.buckets[tenant]
	if !ok {
		if len(l.buckets) >= bucketsKept {
			l.dropFull(now)
		}
		bucket = rate.NewLimiter(bucketQPS, bucketBurst)
		l.buckets[tenant] = bucket
	}
	return bucket.ReserveN(now, 1).DelayFrom(now)
}

// dropFull forgets the buckets that hold every token at now. Callers hold mu.
func (l *tenantBuckets[T]) dropFull(now time.Time) {
	for tenant, bucket := range l.buckets {
		if bucket.TokensAt(now) >= bucketBurst {
			delete(l.buckets, tenant)
		}
	}
}

func (l *tenantBuckets[T]) Forget(T) {}

func (l *tenantBuckets[T]) NumRequeues(T) int { return 0 }

// tenantOf is the namespace of an object's key; "" (one shared tenant) for a
// cluster-scoped object's key and for keys of other types.
func tenantOf[T comparable](item T) string {
	if key, ok := any(item).(cache.ObjectName); ok {
		return key.Namespace
	}
	return ""
}

// New returns a typed rate-limited queue named name; the name labels its metrics.
func New[T comparable](name string) kworkqueue.TypedRateLimitingInterface[T] {
	return kworkqueue.NewTypedRateLimitingQueueWithConfig(NewRateLimiter[T](),
		kworkqueue.TypedRateLimitingQueueConfig[T]{Name: name})
}

// errExpected marks errors that are part of normal operation; see Expected.
var errExpected = errors.New("expected")

// Expected marks err as a normal reason to try a key again later, such as an entry
// that waits for another to be written first or a lost check-and-set race. The key is
// requeued with backoff like after any error, and logged at V(4), not as an error.
func Expected(err error) error {
	return expectedError{err}
}

type expectedError struct{ error }

func (e expectedError) Unwrap() []error { return []error{e.error, errExpected} }

// SyncFunc handles one key. A nil error forgets the key's failures; any error requeues
// it with backoff. NotFound must be handled by the SyncFunc: a deleted object is not an
// error.
type SyncFunc[T comparable] func(ctx context.Context, key T) error

// Run drains queue with workers goroutines until ctx is done, then shuts the queue down
// and waits for in-flight syncs to finish. name labels the sync latency series; it is
// the name the queue was made with.
func Run[T comparable](ctx context.Context, name string, queue kworkqueue.TypedRateLimitingInterface[T], workers int, sync SyncFunc[T]) {
	defer utilruntime.HandleCrashWithContext(ctx)
	done := make(chan struct{})
	for range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			wait.UntilWithContext(ctx, func(ctx context.Context) {
				for processNextItem(ctx, name, queue, sync) {
				}
			}, time.Second)
		}()
	}
	<-ctx.Done()
	queue.ShutDownWithDrain()
	for range workers {
		<-done
	}
}

// processNextItem syncs one key and reports false once the queue is shut down.
func processNextItem[T comparable](ctx context.Context, name string, queue kworkqueue.TypedRateLimitingInterface[T], sync SyncFunc[T]) bool {
	key, shutdown := queue.Get()
	if shutdown {
		return false
	}
	defer queue.Done(key)

	start := time.Now()
	err := sync(ctx, key)
	metrics.SyncDuration.WithLabelValues(name, metrics.Result(err)).Observe(time.Since(start).Seconds())
	if err == nil {
		queue.Forget(key)
		return true
	}
	logger := klog.FromContext(ctx)
	switch {
	case ctx.Err() != nil:
		// Shutting down: the key is requeued below and dropped with the queue.
		logger.V(4).Info("Sync interrupted by shutdown", "key", fmt.Sprint(key), "err", err)
	case apierrors.IsConflict(err):
		// The lister's copy was stale: the informer will deliver the newer object, and
		// the retry works on that. Expected, so not an error.
		logger.V(4).Info("Stale cache, requeueing", "key", fmt.Sprint(key), "err", err)
	case errors.Is(err, errExpected):
		logger.V(4).Info("Requeueing", "key", fmt.Sprint(key), "reason", err)
	default:
		utilruntime.HandleErrorWithContext(ctx, err, "Sync failed, requeueing", "key", fmt.Sprint(key), "retries", queue.NumRequeues(key))
	}
	queue.AddRateLimited(key)
	return true
}
