// Command consul-gateway-controller implements the Kubernetes Gateway API on top of
// Consul's API gateway.
//
// This first build only starts, connects to the Kubernetes API server and to Consul,
// reports what it found, and waits for a signal; the status pipeline and the Consul
// syncer are wired in as they land.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func main() {
	klog.InitFlags(nil)
	kubeconfig := flag.String("kubeconfig", "", "path to a kubeconfig; empty means in-cluster configuration")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kubeconfig); err != nil {
		klog.ErrorS(err, "Exiting")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(ctx context.Context, kubeconfig string) error {
	logger := klog.FromContext(ctx)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create kubernetes client: %w", err)
	}
	version, err := kube.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("reach the Kubernetes API server: %w", err)
	}
	if _, err := kube.Discovery().ServerResourcesForGroupVersion(gatewayv1.GroupVersion.String()); err != nil {
		return fmt.Errorf("find the Gateway API (%s); are its CRDs installed? %w", gatewayv1.GroupVersion, err)
	}
	logger.Info("Connected to Kubernetes", "host", cfg.Host, "version", version.GitVersion)

	// consul/api reads CONSUL_HTTP_ADDR, CONSUL_HTTP_TOKEN(_FILE), CONSUL_CACERT and the rest.
	consul, err := consulapi.NewClient(consulapi.DefaultConfig())
	if err != nil {
		return fmt.Errorf("create consul client: %w", err)
	}
	leader, err := consul.Status().Leader()
	if err != nil {
		return fmt.Errorf("reach Consul: %w", err)
	}
	logger.Info("Connected to Consul", "leader", leader)

	logger.Info("Running; the status pipeline and the Consul syncer are not built yet")
	<-ctx.Done()
	if errors.Is(context.Cause(ctx), context.Canceled) {
		logger.Info("Shutting down")
	}
	return nil
}
