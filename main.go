// Command consul-gateway-controller implements the Kubernetes Gateway API on top of
// Consul's API gateway.
//
// It runs two halves: the status pipeline judges GatewayClasses, Gateways and routes of
// its classes and writes their status; the Consul syncer writes Consul config entries
// from what the API server confirmed, and feeds Consul's verdicts back into status.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/listers"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewayscheme "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/scheme"

	configclient "github.com/consul-gateway-controller/consul-gateway-controller/api/client"
	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/catalog"
	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/leader"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/metrics"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/options"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
)

func main() {
	opts := options.New()
	fss := opts.Flags()
	fs := pflag.NewFlagSet("consul-gateway-controller", pflag.ContinueOnError)
	options.AddTo(fs, fss)
	fs.Usage = func() { options.Usage(os.Stderr, fss) }
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "consul-gateway-controller: %v\n", err)
		os.Exit(2)
	}
	if err := opts.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "consul-gateway-controller: invalid flags: %s\n", strings.ReplaceAll(err.Error(), "\n", "; "))
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts); err != nil {
		klog.ErrorS(err, "Exiting")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(ctx context.Context, opts *options.Options) error {
	logger := klog.FromContext(ctx)
	cfg, err := clientcmd.BuildConfigFromFlags("", opts.Kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = opts.KubeAPIQPS, opts.KubeAPIBurst
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create kubernetes client: %w", err)
	}
	clients, err := newSideClients(cfg)
	if err != nil {
		return err
	}
	gateway, err := gatewayclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create gateway-api client: %w", err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create metadata client: %w", err)
	}
	configs, err := configclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create GatewayConfig client: %w", err)
	}
	version, err := kube.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("reach the Kubernetes API server: %w", err)
	}
	if _, err := kube.Discovery().ServerResourcesForGroupVersion(gatewayv1.GroupVersion.String()); err != nil {
		return fmt.Errorf("find the Gateway API (%s); are its CRDs installed? %w", gatewayv1.GroupVersion, err)
	}
	if _, err := kube.Discovery().ServerResourcesForGroupVersion(v1alpha1.SchemeGroupVersion.String()); err != nil {
		return fmt.Errorf("find this controller's own API (%s); is deploy/crds installed? %w", v1alpha1.SchemeGroupVersion, err)
	}
	logger.Info("Connected to Kubernetes", "host", cfg.Host, "version", version.GitVersion)
	consulClient, err := consulapi.NewClient(opts.ConsulConfig())
	if err != nil {
		return fmt.Errorf("create consul client: %w", err)
	}

	// Events are writes: they reach the API server only while this replica leads.
	eventBroadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: clients.events.EventsV1()})
	defer eventBroadcaster.Shutdown()
	recorder := eventBroadcaster.NewRecorder(gatewayscheme.Scheme, opts.ControllerName)

	inf := informers.New(kube, gateway, configs, 0)
	bundle := informers.NewBundleVersion(meta, 0)
	syncer := consul.NewSyncer(consul.Config{
		Client:      consulClient,
		Naming:      opts.Naming,
		Ownership:   opts.Ownership(),
		Options:     opts.Translation,
		Secrets:     inf.Secrets.Lister(),
		Services:    inf.Services.Lister(),
		OwnerExists: inf.Exists,
		Workers:     opts.ConsulWorkers,
	})
	publishers := gwsync.Publishers{syncer}
	var (
		owned       *informers.Owned
		deployer    *dataplane.Controller
		registrar   *catalog.Registrar
		deployments gwsync.GatewayDeployments
	)
	if opts.DeployGateways {
		owned = informers.NewOwned(kube, dataplane.ManagedSelector, 0)
		deployer, err = dataplane.NewController(ctx, dataplane.Config{
			Client:         kube,
			ControllerName: gatewayv1.GatewayController(opts.ControllerName),
			Gateways:       inf.Gateways.Lister(),
			Classes:        inf.GatewayClasses.Lister(),
			Synced:         []cache.InformerSynced{inf.Gateways.Informer().HasSynced, inf.GatewayClasses.Informer().HasSynced},
			Configs:        listers.New[*v1alpha1.GatewayConfig](inf.GatewayConfigs.GetIndexer(), v1alpha1.Resource("gatewayconfigs")),
			Owned:          owned,
			Defaults:       opts.GatewayDefaults(),
			FieldManager:   fieldManager,
			Workers:        opts.DataplaneWorkers,
		})
		if err != nil {
			return err
		}
		registrar = catalog.NewRegistrar(catalog.Config{
			Client:      consulClient,
			Naming:      opts.Naming,
			Ownership:   opts.Ownership(),
			Pods:        owned.Pods.Lister(),
			PodsSynced:  owned.Pods.Informer().HasSynced,
			GatewayPods: dataplane.PodSelector,
			Workers:     opts.ConsulWorkers,
		})
		if err := owned.AddEventHandlers(ctx, registrar.Enqueue); err != nil {
			return err
		}
		publishers = append(publishers, deployer, registrar)
		deployments = deployer
	}
	controller, err := gwsync.NewController(ctx, gwsync.Config{
		ControllerName: gatewayv1.GatewayController(opts.ControllerName),
		Capabilities:   consullimits.Consul115,
		Informers:      gwsync.InformersOf(inf),
		GatewayClient:  gateway,
		Publisher:      publishers,
		Verdicts:       syncer,
		Deployments:    deployments,
		Workers:        gwsync.Workers{GatewayClasses: 1, Gateways: opts.GatewayWorkers, Routes: opts.RouteWorkers},
		BundleVersion:  bundle.Get,
		Clock:          clock.RealClock{},
		Events:         recorder,
	})
	if err != nil {
		return err
	}
	syncer.OnVerdictChange(controller.Enqueue)
	if owned != nil {
		// A gateway pod or Service that changes may change its Gateway's status.
		if err := owned.AddEventHandlers(ctx, func(gw cache.ObjectName) { controller.Enqueue(gatewayapi.GatewayKind, gw) }); err != nil {
			return err
		}
	}
	if err := bundle.OnChange(controller.EnqueueAllGatewayClasses); err != nil {
		return err
	}
	// Everything started below stops when run returns, whatever the reason: a lost
	// election returns while the signal context is still live. The informers only read,
	// so the process does not wait for them: a reflector backing off from an
	// unreachable API server held the exit of a deposed leader for seconds.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inf.StartWithContext(ctx)
	go bundle.Run(ctx)
	if owned != nil {
		owned.StartWithContext(ctx)
	}
	// Probes answer from the start: /readyz says why the process is not ready yet
	// (for example RBAC that keeps a cache from syncing) instead of refusing connections.
	var leading atomic.Bool
	synced := append(inf.HasSynced(), bundle.HasSynced, controller.HasSynced)
	if owned != nil {
		synced = append(synced, owned.HasSynced()...)
	}
	handler := metrics.Handler(func() error { return ready(synced, consulClient, leading.Load()) }, opts.Profiling)
	for _, addr := range []string{opts.MetricsBindAddress, opts.HealthProbeBindAddress} {
		go func() {
			if err := metrics.Serve(ctx, addr, handler); err != nil {
				klog.FromContext(ctx).Error(err, "Serving metrics and health checks failed", "address", addr)
			}
		}()
	}
	if !cache.WaitForNamedCacheSyncWithContext(ctx, bundle.HasSynced) {
		return fmt.Errorf("gateway-api CRD cache did not sync: %w", context.Cause(ctx))
	}

	// Informers warm up in every replica; only the leader runs the writers.
	writers := func(ctx context.Context) error {
		leading.Store(true)
		defer leading.Store(false)
		if err := eventBroadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
			return fmt.Errorf("start recording events: %w", err)
		}
		syncerDone := make(chan error, 1)
		go func() { syncerDone <- syncer.Run(ctx, controller.InitialSyncDone()) }()
		deployerDone, registrarDone := make(chan error, 1), make(chan error, 1)
		if deployer != nil {
			go func() { deployerDone <- deployer.Run(ctx) }()
			go func() { registrarDone <- registrar.Run(ctx, controller.InitialSyncDone()) }()
		} else {
			deployerDone <- nil
			registrarDone <- nil
		}
		err := controller.Run(ctx)
		return errors.Join(err, <-syncerDone, <-deployerDone, <-registrarDone)
	}
	if !opts.LeaderElect {
		metrics.Leader.Set(1)
		return writers(ctx)
	}
	return leader.Run(ctx, clients.leaderElection, opts.LeaderConfig(), writers)
}

// fieldManager names this controller in the managedFields of what it applies.
const fieldManager = "consul-gateway-controller"

// sideClients are the clients of requests that must not wait behind status writes in
// the main client's rate limiter. A Lease renewal that waits there past the renew
// deadline costs the Lease, and the process exits in the middle of a cold start; an
// Event burst would otherwise take the budget of the status writes it reports on.
// kube-controller-manager and kube-scheduler give leader election and Events clients
// of their own for the same reasons.
type sideClients struct {
	leaderElection kubernetes.Interface
	events         kubernetes.Interface
}

// Renewals come every retry period, so a small budget of their own suffices. Events
// follow status writes (about one per changed object), so they get a budget as large
// as the status writes', in a bucket of their own.
const leaderElectionQPS, leaderElectionBurst = 5, 10

func newSideClients(cfg *rest.Config) (sideClients, error) {
	client := func(agent string, qps float32, burst int) (kubernetes.Interface, error) {
		c := rest.CopyConfig(cfg)
		c.QPS, c.Burst, c.RateLimiter = qps, burst, nil
		c = rest.AddUserAgent(c, agent)
		k, err := kubernetes.NewForConfig(c)
		if err != nil {
			return nil, fmt.Errorf("create %s client: %w", agent, err)
		}
		return k, nil
	}
	var (
		sc  sideClients
		err error
	)
	if sc.leaderElection, err = client("leader-election", leaderElectionQPS, leaderElectionBurst); err != nil {
		return sc, err
	}
	sc.events, err = client("events", cfg.QPS, cfg.Burst)
	return sc, err
}

// ready is /readyz: the caches have synced and, while leading, Consul answers.
func ready(caches []cache.InformerSynced, consul *consulapi.Client, leading bool) error {
	for _, synced := range caches {
		if !synced() {
			return errors.New("the caches have not synced")
		}
	}
	if !leading {
		return nil
	}
	if _, err := consul.Status().Leader(); err != nil {
		return fmt.Errorf("consul does not answer: %w", err)
	}
	return nil
}
