// Command consul-gateway-controller implements the Kubernetes Gateway API on top of
// Consul's API gateway.
//
// Today it runs the status pipeline: it judges GatewayClasses, Gateways and routes of
// its classes and writes their status. The Consul syncer, which programs Consul from
// the confirmed objects, is not wired in yet; the binary only checks that Consul answers.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
)

type options struct {
	kubeconfig     string
	controllerName string
	workers        int
}

func main() {
	klog.InitFlags(nil)
	var opts options
	flag.StringVar(&opts.kubeconfig, "kubeconfig", "", "path to a kubeconfig; empty means in-cluster configuration")
	flag.StringVar(&opts.controllerName, "controller-name", string(gwsync.DefaultControllerName), "the GatewayClass controllerName this controller serves")
	flag.IntVar(&opts.workers, "workers", 2, "status workers per kind")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts); err != nil {
		klog.ErrorS(err, "Exiting")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(ctx context.Context, opts options) error {
	logger := klog.FromContext(ctx)
	cfg, err := clientcmd.BuildConfigFromFlags("", opts.kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create kubernetes client: %w", err)
	}
	gateway, err := gatewayclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create gateway-api client: %w", err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create metadata client: %w", err)
	}
	version, err := kube.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("reach the Kubernetes API server: %w", err)
	}
	if _, err := kube.Discovery().ServerResourcesForGroupVersion(gatewayv1.GroupVersion.String()); err != nil {
		return fmt.Errorf("find the Gateway API (%s); are its CRDs installed? %w", gatewayv1.GroupVersion, err)
	}
	logger.Info("Connected to Kubernetes", "host", cfg.Host, "version", version.GitVersion)
	if err := checkConsul(ctx); err != nil {
		return err
	}

	inf := informers.New(kube, gateway, 0)
	bundle := informers.NewBundleVersion(meta, 0)
	controller, err := gwsync.NewController(gwsync.Config{
		ControllerName: gatewayv1.GatewayController(opts.controllerName),
		Capabilities:   gwsync.Consul115,
		Informers:      inf,
		GatewayClient:  gateway,
		Publisher:      loggingPublisher{},
		Workers:        gwsync.Workers{GatewayClasses: 1, Gateways: opts.workers, HTTPRoutes: opts.workers, TCPRoutes: opts.workers, GRPCRoutes: opts.workers},
		BundleVersion:  bundle.Get,
		Clock:          clock.RealClock{},
	})
	if err != nil {
		return err
	}
	if err := bundle.OnChange(controller.EnqueueAllGatewayClasses); err != nil {
		return err
	}
	inf.Start(ctx.Done())
	defer inf.Shutdown()
	go bundle.Run(ctx)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, bundle.HasSynced) {
		return fmt.Errorf("gateway-api CRD cache did not sync: %w", context.Cause(ctx))
	}
	return controller.Run(ctx)
}

// checkConsul only checks that Consul answers until the syncer is wired in. consul/api
// reads CONSUL_HTTP_ADDR, CONSUL_HTTP_TOKEN(_FILE), CONSUL_CACERT and the rest.
func checkConsul(ctx context.Context) error {
	consul, err := consulapi.NewClient(consulapi.DefaultConfig())
	if err != nil {
		return fmt.Errorf("create consul client: %w", err)
	}
	leader, err := consul.Status().Leader()
	if err != nil {
		return fmt.Errorf("reach Consul: %w", err)
	}
	klog.FromContext(ctx).Info("Connected to Consul", "leader", leader)
	return nil
}

// loggingPublisher stands where the Consul syncer will consume confirmed objects.
type loggingPublisher struct{}

func (loggingPublisher) Publish(ctx context.Context, c gwsync.Confirmation) {
	klog.FromContext(ctx).V(4).Info("Confirmed", "kind", c.Kind, "object", c.Key, "deleted", c.Object == nil)
}
