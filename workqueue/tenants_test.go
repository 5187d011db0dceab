package workqueue

import (
	"fmt"
	"testing"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/tools/cache"
	kworkqueue "k8s.io/client-go/util/workqueue"
)

// sharedBucketLimiter is the retry policy before tenants had buckets of their own:
// one bucket for every key of a queue. BenchmarkRetryDelayAcrossTenants compares with
// it.
func sharedBucketLimiter[T comparable]() kworkqueue.TypedRateLimiter[T] {
	return kworkqueue.NewTypedMaxOfRateLimiter(
		kworkqueue.NewTypedItemExponentialFailureRateLimiter[T](baseDelay, maxDelay),
		&kworkqueue.TypedBucketRateLimiter[T]{Limiter: rate.NewLimiter(bucketQPS, bucketBurst)},
	)
}

// churn fails n keys of namespace noisy once each, as a tenant whose objects all fail
// their sync at once would, and returns the delay the first retry of quiet's key then
// gets.
func churn(limiter kworkqueue.TypedRateLimiter[cache.ObjectName], n int) time.Duration {
	for i := range n {
		limiter.When(cache.ObjectName{Namespace: "noisy", Name: fmt.Sprintf("route-%d", i)})
	}
	return limiter.When(cache.ObjectName{Namespace: "quiet", Name: "route"})
}

// One tenant's failing objects do not delay another tenant's retry: its first retry
// waits the exponential backoff's base, not behind the other tenant's retries.
func TestRetriesOfOneTenantDoNotDelayAnother(t *testing.T) {
	if got := churn(NewRateLimiter[cache.ObjectName](), 5000); got > time.Second {
		t.Errorf("after 5,000 failures in another namespace a first retry waits %v, want the base backoff (%v)", got, baseDelay)
	}
	// The same churn within one tenant is still paced by its bucket.
	limiter := NewRateLimiter[cache.ObjectName]()
	for i := range 5000 {
		limiter.When(cache.ObjectName{Namespace: "noisy", Name: fmt.Sprintf("route-%d", i)})
	}
	if got := limiter.When(cache.ObjectName{Namespace: "noisy", Name: "one-more"}); got < time.Minute {
		t.Errorf("after 5,000 failures in its own namespace a retry waits %v, want the tenant's bucket to pace it (minutes)", got)
	}
	// Keys that name no tenant share one bucket.
	shared := NewRateLimiter[string]()
	for i := range 5000 {
		shared.When(fmt.Sprintf("class-%d", i))
	}
	if got := shared.When("another"); got < time.Minute {
		t.Errorf("after 5,000 failures of untenanted keys another waits %v, want the shared bucket to pace it", got)
	}
}

// Full buckets are dropped once many are kept: a namespace that went leaves nothing,
// and one whose bucket is still refilling keeps it.
func TestTenantBucketsAreBounded(t *testing.T) {
	now := time.Now()
	l := newTenantBuckets[cache.ObjectName]()
	l.now = func() time.Time { return now }
	for i := range bucketsKept {
		l.When(cache.ObjectName{Namespace: fmt.Sprintf("ns-%d", i), Name: "x"})
	}
	// Within the same instant no bucket has refilled: none is dropped.
	l.When(cache.ObjectName{Namespace: "one-more", Name: "x"})
	if n := len(l.buckets); n != bucketsKept+1 {
		t.Errorf("%d buckets kept while all refill, want %d", n, bucketsKept+1)
	}
	// A second later every bucket is full again: the next new tenant drops them.
	now = now.Add(time.Second)
	l.When(cache.ObjectName{Namespace: "later", Name: "x"})
	if n := len(l.buckets); n != 1 {
		t.Errorf("%d buckets kept once all were full, want 1 (the new tenant's)", n)
	}
}

// BenchmarkRetryDelayAcrossTenants reports the delay of one tenant's first retry after
// another tenant's 5,000 objects failed, with one bucket per queue (the policy before)
// and one per tenant, in the same run: quiet-retry-s is that delay.
func BenchmarkRetryDelayAcrossTenants(b *testing.B) {
	for _, policy := range []struct {
		name    string
		limiter func() kworkqueue.TypedRateLimiter[cache.ObjectName]
	}{
		{"bucket-per-queue", sharedBucketLimiter[cache.ObjectName]},
		{"bucket-per-tenant", NewRateLimiter[cache.ObjectName]},
	} {
		b.Run(policy.name, func(b *testing.B) {
			var delay time.Duration
			for b.Loop() {
				delay = churn(policy.limiter(), 5000)
			}
			b.ReportMetric(delay.Seconds(), "quiet-retry-s")
		})
	}
}
