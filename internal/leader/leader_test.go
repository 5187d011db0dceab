package leader

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

func TestConfigValidate(t *testing.T) {
	good := Config{Namespace: "ns", Name: "lease", Identity: "a", LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
	tests := []struct {
		name  string
		edit  func(*Config)
		valid bool
	}{
		{"kube-controller-manager timing", func(*Config) {}, true},
		{"no identity", func(c *Config) { c.Identity = "" }, false},
		{"no namespace", func(c *Config) { c.Namespace = "" }, false},
		{"renew deadline not below the lease", func(c *Config) { c.RenewDeadline = 15 * time.Second }, false},
		{"no margin for the writers to stop", func(c *Config) { c.LeaseDuration = 12 * time.Second }, false},
		{"retry period not below the renew deadline", func(c *Config) { c.RetryPeriod = 10 * time.Second }, false},
		{"zero retry period", func(c *Config) { c.RetryPeriod = 0 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.edit(&c)
			if err := c.Validate(); (err == nil) != tt.valid {
				t.Errorf("Validate() = %v, want valid=%v", err, tt.valid)
			}
		})
	}
}

// fakeLock holds a Lease record in memory; writes fail while failing is set.
type fakeLock struct {
	resourcelock.Interface // unused methods panic
	identity               string
	failing                bool
}

func (f *fakeLock) Identity() string { return f.identity }

func (f *fakeLock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	if f.failing {
		return errors.New("unreachable")
	}
	return nil
}

// TestFenceCountsFromTheLastRenewal: the writers stop a renew deadline after the last
// renewal of ours that succeeded was sent; failed writes and a release (a record
// without our identity) do not push that moment on.
func TestFenceCountsFromTheLastRenewal(t *testing.T) {
	inner := &fakeLock{identity: "a"}
	lock := &renewals{Interface: inner}
	ctx := context.Background()
	before := time.Now()
	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "a"}); err != nil {
		t.Fatal(err)
	}
	renewed := lock.lastRenewal()
	if renewed.Before(before) {
		t.Fatalf("last renewal %v, want at or after %v", renewed, before)
	}
	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: ""}); err != nil {
		t.Fatal(err)
	}
	inner.failing = true
	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "a"}); err == nil {
		t.Fatal("the failing write succeeded")
	}
	if got := lock.lastRenewal(); !got.Equal(renewed) {
		t.Fatalf("last renewal moved to %v after a release and a failed renewal, want %v", got, renewed)
	}

	const deadline = 50 * time.Millisecond
	runCtx, cancel := context.WithCancel(ctx)
	go fence(runCtx, klog.Background(), cancel, lock, deadline)
	select {
	case <-runCtx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the fence never stopped the writers")
	}
	if stopped := time.Now(); stopped.Before(renewed.Add(deadline)) {
		t.Errorf("the writers stopped at %v, before the renew deadline ran out at %v", stopped, renewed.Add(deadline))
	}
}
