package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
)

// Each address serves one thing, so that each can be exposed, protected and probed on
// its own: the health checks must answer the kubelet without a token, /metrics only
// with one (DelegatedAuth), and the profiles, which show the process's memory, only on
// loopback (options.Options.Validate).

// HealthHandler serves /healthz and /readyz, and nothing else. ready returns nil once
// the process can do its work; see ReadinessHandler for what /readyz tells of why not.
func HealthHandler(ready func() error) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /readyz", ReadinessHandler(ready))
	return mux
}

// MetricsHandler serves /metrics, and nothing else, through guard: DelegatedAuth.Wrap,
// or Open with --metrics-auth=none.
func MetricsHandler(guard func(http.Handler) http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", guard(promhttp.HandlerFor(Registry, promhttp.HandlerOpts{})))
	return mux
}

// Open is the guard of --metrics-auth=none: every request is served.
func Open(next http.Handler) http.Handler { return next }

// ProfilingHandler serves Go's pprof profiles under /debug/pprof/, and nothing else.
// It has no authentication: it is only ever served on its own, loopback, address.
func ProfilingHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// Serve serves handler, named what in the log, on addr until ctx is done; addr "0"
// (or empty) disables it.
func Serve(ctx context.Context, what, addr string, handler http.Handler) error {
	if addr == "0" || addr == "" {
		return nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s for %s: %w", addr, what, err)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		// Handlers log through the server's context (klog.FromContext).
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	klog.FromContext(ctx).Info("Serving "+what, "address", l.Addr().String())
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s on %s: %w", what, addr, err)
	}
	return nil
}
