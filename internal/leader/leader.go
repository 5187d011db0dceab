// Package leader owns leader election: only the replica holding a coordination.k8s.io
// Lease runs the writers, and it stops them before the Lease can pass to another one.
package leader

import (
	"context"
	"errors"
	"fmt"
	gosync "sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/metrics"
)

// ErrLeadershipLost is returned when the Lease could not be renewed in time. The
// writers have stopped by then; the process should exit non-zero, as kube components
// do, and start over as a candidate.
var ErrLeadershipLost = errors.New("leader election lost")

// Config names the Lease and times the election. LeaseDuration must exceed
// RenewDeadline plus RetryPeriod by the time the writers need to stop: that margin is
// what keeps two leaders from ever writing at once.
type Config struct {
	Namespace, Name string
	// Identity must be unique per replica (for example the pod name).
	Identity      string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// Validate checks the timing rule above.
func (c Config) Validate() error {
	if c.Namespace == "" || c.Name == "" || c.Identity == "" {
		return errors.New("the lease namespace, name and identity must be set")
	}
	if c.RetryPeriod <= 0 || c.RenewDeadline <= c.RetryPeriod || c.LeaseDuration <= c.RenewDeadline+c.RetryPeriod {
		return fmt.Errorf("want 0 < retry period (%s) < renew deadline (%s) and renew deadline + retry period < lease duration (%s)",
			c.RetryPeriod, c.RenewDeadline, c.LeaseDuration)
	}
	return nil
}

// Run campaigns for the Lease and runs lead while holding it.
//
// When the Lease is lost, lead's context is cancelled and Run waits for lead to return
// before it returns ErrLeadershipLost. When ctx is done (SIGTERM), lead's context is
// cancelled, Run waits for lead to drain, and only then releases the Lease and returns
// nil, so a successor never overlaps in-flight writes.
func Run(ctx context.Context, client kubernetes.Interface, cfg Config, lead func(context.Context) error) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	logger := klog.FromContext(ctx).WithValues("lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity)
	// The election outlives ctx: it is stopped only once lead has returned.
	electionCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElection()

	var mu gosync.Mutex
	leading := false
	stopUnlessLeading := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !leading {
			stopElection()
		}
	})
	defer stopUnlessLeading()

	leadDone := make(chan error, 1)
	lock := &renewals{Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.RenewDeadline,
		RetryPeriod:     cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaseCtx context.Context) {
				mu.Lock()
				leading = true
				mu.Unlock()
				logger.Info("Started leading")
				runCtx, cancel := context.WithCancel(leaseCtx)
				go fence(runCtx, logger, cancel, lock, cfg.RenewDeadline)
				stopOnShutdown := context.AfterFunc(ctx, cancel)
				metrics.Leader.Set(1)
				leadDone <- lead(runCtx)
				metrics.Leader.Set(0)
				stopOnShutdown()
				cancel()
				// The writers have stopped: now the Lease may be released.
				stopElection()
			},
			OnStoppedLeading: func() { logger.Info("Stopped leading") },
		},
	})
	if err != nil {
		return fmt.Errorf("create leader elector: %w", err)
	}
	elector.Run(electionCtx)

	mu.Lock()
	wasLeading := leading
	mu.Unlock()
	if !wasLeading {
		return nil // shut down before ever leading
	}
	leadErr := <-leadDone
	logger.Info("Writers stopped")
	if ctx.Err() != nil {
		return leadErr
	}
	return errors.Join(ErrLeadershipLost, leadErr)
}

// renewals is the Lease lock, noting when each write of ours that holds the Lease was
// sent. The fence counts the renew deadline from there: client-go cancels the leader's
// context only after its renew loop gave up and, with ReleaseOnCancel, after it also
// tried to release the Lease, which against an API server it cannot reach takes up to
// another renew deadline, while a follower may take over a lease duration after the
// last renewal.
type renewals struct {
	resourcelock.Interface

	mu   gosync.Mutex
	last time.Time // when the last renewal that succeeded was sent
}

func (r *renewals) Create(ctx context.Context, record resourcelock.LeaderElectionRecord) error {
	return r.note(record, func() error { return r.Interface.Create(ctx, record) })
}

func (r *renewals) Update(ctx context.Context, record resourcelock.LeaderElectionRecord) error {
	return r.note(record, func() error { return r.Interface.Update(ctx, record) })
}

func (r *renewals) note(record resourcelock.LeaderElectionRecord, write func() error) error {
	sent := time.Now()
	if err := write(); err != nil {
		return err
	}
	if record.HolderIdentity != r.Identity() {
		return nil // a release
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if sent.After(r.last) {
		r.last = sent
	}
	return nil
}

func (r *renewals) lastRenewal() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// fence stops the writers (cancel) once deadline has passed since the last renewal
// was sent: a follower takes over no sooner than the lease duration after it saw that
// renewal, and Config.Validate keeps the lease duration above the deadline.
func fence(ctx context.Context, logger klog.Logger, cancel context.CancelFunc, lock *renewals, deadline time.Duration) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		left := time.Until(lock.lastRenewal().Add(deadline))
		if left <= 0 {
			logger.Info("Lease not renewed within the renew deadline; stopping the writers", "renewDeadline", deadline)
			cancel()
			return
		}
		timer.Reset(left)
	}
}
