package responder

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	gosync "sync"
	"time"

	"k8s.io/klog/v2"
)

// Addresses are where a responder process listens.
type Addresses struct {
	// Serve is the mTLS address gateways connect to.
	Serve string
	// Health serves /healthz and /readyz in plain HTTP for the kubelet's probes.
	Health string
}

// Run runs a responder process until ctx is done: it follows its identity, keeps
// its instance registered (unless reg.ID is ""), serves mTLS on addrs.Serve and its
// probes on addrs.Health.
func (s *Server) Run(ctx context.Context, addrs Addresses, reg Registration) error {
	serve, err := net.Listen("tcp", addrs.Serve)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addrs.Serve, err)
	}
	health, err := net.Listen("tcp", addrs.Health)
	if err != nil {
		serve.Close()
		return fmt.Errorf("listen on %s: %w", addrs.Health, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg gosync.WaitGroup
	wg.Go(func() { s.FollowIdentity(ctx) })
	if reg.ID != "" {
		wg.Go(func() { s.KeepRegistered(ctx, reg) })
	}
	var healthErr error
	wg.Go(func() { healthErr = s.serveProbes(ctx, health) })
	err = s.Serve(ctx, serve)
	cancel()
	wg.Wait()
	return errors.Join(err, healthErr)
}

// serveProbes serves /healthz (the process answers) and /readyz (it has its
// identity) on l until ctx is done.
func (s *Server) serveProbes(ctx context.Context, l net.Listener) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := s.Ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	klog.FromContext(ctx).Info("Serving probes", "address", l.Addr().String())
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve probes on %s: %w", l.Addr(), err)
	}
	return nil
}
