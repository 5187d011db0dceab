package main

import (
	"context"
	"net/http"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/metrics"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/options"
)

// serveEndpoints serves, each on its own address until ctx is done: the health
// checks (/readyz answering ready), /metrics behind --metrics-auth, and with
// --profiling the profiles. They answer from the start: /readyz says why the process
// is not ready yet (for example RBAC that keeps a cache from syncing) instead of
// refusing connections. reviews is the client of /metrics' token and access reviews.
func serveEndpoints(ctx context.Context, opts *options.Options, reviews kubernetes.Interface, ready func() error) {
	logger := klog.FromContext(ctx)
	guard := metrics.Open
	if opts.MetricsAuth == options.MetricsAuthKubernetes {
		guard = metrics.NewDelegatedAuth(metrics.DelegatedAuthConfig{Client: reviews}).Wrap
	} else if opts.MetricsBindAddress != "0" {
		logger.Info("Serving /metrics without authentication (--metrics-auth=none)", "address", opts.MetricsBindAddress)
	}
	serve := func(what, addr string, handler http.Handler) {
		go func() {
			if err := metrics.Serve(ctx, what, addr, handler); err != nil {
				logger.Error(err, "Serving failed", "what", what, "address", addr)
			}
		}()
	}
	serve("health checks", opts.HealthProbeBindAddress, metrics.HealthHandler(ready))
	serve("metrics", opts.MetricsBindAddress, metrics.MetricsHandler(guard))
	if opts.Profiling {
		serve("profiles", opts.ProfilingBindAddress, metrics.ProfilingHandler())
	}
}

// ready is /readyz: the caches have synced and, while leading, Consul answers. Its
// errors are metrics.NotReadyErrors, whose reason alone /readyz answers.
func ready(caches []cache.InformerSynced, consul *consulapi.Client, leading bool) error {
	for _, synced := range caches {
		if !synced() {
			return metrics.NotReady("the caches have not synced", nil)
		}
	}
	if !leading {
		return nil
	}
	// Consul's error names its address, server name and certificates: the log gets it,
	// the probe's caller only the reason.
	if _, err := consul.Status().Leader(); err != nil {
		return metrics.NotReady("consul does not answer", err)
	}
	return nil
}
