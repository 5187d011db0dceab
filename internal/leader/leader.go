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
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name},
			Client:     client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
		},
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
