// Command consul-gateway-controller implements the Kubernetes Gateway API on top of
// Consul's API gateway.
//
// It runs two halves: the status pipeline judges GatewayClasses, Gateways and routes of
// its classes and writes their status; the Consul syncer writes Consul config entries
// from what the API server confirmed, and feeds Consul's verdicts back into status.
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

	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
)

type options struct {
	kubeconfig     string
	controllerName string
	workers        int
	clusterID      string
	consulWorkers  int
	naming         consul.Naming
	translation    consul.Options
}

func main() {
	klog.InitFlags(nil)
	var opts options
	flag.StringVar(&opts.kubeconfig, "kubeconfig", "", "path to a kubeconfig; empty means in-cluster configuration")
	flag.StringVar(&opts.controllerName, "controller-name", string(gwsync.DefaultControllerName), "the GatewayClass controllerName this controller serves")
	flag.IntVar(&opts.workers, "workers", 2, "status workers per kind")
	flag.StringVar(&opts.clusterID, "cluster-id", "default", "names this cluster in the ownership meta of Consul entries; clusters sharing a Consul need different ids")
	flag.IntVar(&opts.consulWorkers, "consul-workers", 2, "workers writing Consul config entries")
	flag.StringVar(&opts.naming.Prefix, "consul-entry-prefix", "", "prefix of every Consul config entry name")
	flag.StringVar(&opts.naming.Partition, "consul-partition", "", "Consul Enterprise admin partition of every entry")
	flag.StringVar(&opts.naming.DestinationNamespace, "consul-destination-namespace", "", "Consul Enterprise namespace of every entry")
	flag.BoolVar(&opts.naming.MirrorNamespaces, "consul-mirror-namespaces", false, "put entries into the Consul Enterprise namespace named like their Kubernetes namespace")
	flag.StringVar(&opts.naming.MirrorPrefix, "consul-mirror-namespaces-prefix", "", "prefix of mirrored Consul namespaces")
	flag.BoolVar(&opts.translation.ManageServiceDefaults, "manage-service-defaults", false, "write service-defaults with protocol http for HTTP backends that have none")
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
	ownership := consul.Ownership{Controller: opts.controllerName, ClusterID: opts.clusterID}
	if err := ownership.Validate(); err != nil {
		return fmt.Errorf("invalid flags: %w", err)
	}
	// consul/api reads CONSUL_HTTP_ADDR, CONSUL_HTTP_TOKEN(_FILE), CONSUL_CACERT and the rest.
	consulClient, err := consulapi.NewClient(consulapi.DefaultConfig())
	if err != nil {
		return fmt.Errorf("create consul client: %w", err)
	}

	inf := informers.New(kube, gateway, 0)
	bundle := informers.NewBundleVersion(meta, 0)
	var controller *gwsync.Controller
	syncer := consul.NewSyncer(consul.Config{
		Client:        consulClient,
		Naming:        opts.naming,
		Ownership:     ownership,
		Options:       opts.translation,
		Secrets:       inf.Secrets.Lister(),
		Services:      inf.Services.Lister(),
		OwnerExists:   inf.Exists,
		StatusChanged: func(kind gatewayv1.Kind, key cache.ObjectName) { controller.Enqueue(kind, key) },
		Workers:       opts.consulWorkers,
	})
	controller, err = gwsync.NewController(gwsync.Config{
		ControllerName: gatewayv1.GatewayController(opts.controllerName),
		Capabilities:   gwsync.Consul115,
		Informers:      inf,
		GatewayClient:  gateway,
		Publisher:      syncer,
		DataPlane:      syncer,
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
	inf.StartWithContext(ctx)
	defer inf.Shutdown()
	go bundle.Run(ctx)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, bundle.HasSynced) {
		return fmt.Errorf("gateway-api CRD cache did not sync: %w", context.Cause(ctx))
	}
	syncerDone := make(chan error, 1)
	go func() { syncerDone <- syncer.Run(ctx, controller.InitialSyncDone()) }()
	if err := controller.Run(ctx); err != nil {
		return err
	}
	return <-syncerDone
}
