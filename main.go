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
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
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
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/identity"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/intentions"
	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/cli"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/leader"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/metrics"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/options"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
)

func main() {
	// Subcommands come first; without one the binary is the controller, with its flags
	// as they have always been.
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "translate":
			os.Exit(cli.Translate(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
		case "status", "explain":
			command := cli.Status
			if os.Args[1] == "explain" {
				command = cli.Explain
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			code := command(ctx, os.Args[2:], os.Stdout, os.Stderr)
			stop()
			os.Exit(code)
		}
	}
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

// run connects to the API server and Consul, wires the pipeline, serves the health
// checks, metrics and profiles, starts the informers, and runs the writers while this
// replica leads (throughout, without leader election).
func run(ctx context.Context, opts *options.Options) error {
	c, err := newClients(ctx, opts)
	if err != nil {
		return err
	}
	if err := resolveClusterID(ctx, opts, c.kube); err != nil {
		return err
	}
	// Checked before anything is written: without the policy the cluster-wide
	// workload grants deploying gateways needs are not narrowed to gateways.
	if opts.DeployGateways && opts.RequireAdmissionPolicy {
		if err := dataplane.CheckAdmissionPolicy(ctx, c.kube); err != nil {
			return fmt.Errorf("refusing to deploy gateways (install the admission policy, or pass --require-admission-policy=false to run without it): %w", err)
		}
	}
	// Events are writes: they reach the API server only while this replica leads.
	eventBroadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: c.side.events.EventsV1()})
	defer eventBroadcaster.Shutdown()
	p, err := newPipeline(ctx, opts, c, eventBroadcaster.NewRecorder(gatewayscheme.Scheme, opts.ControllerName))
	if err != nil {
		return err
	}
	// Everything started below stops when run returns, whatever the reason: a lost
	// election returns while the signal context is still live. The informers only read,
	// so the process does not wait for them: a reflector backing off from an
	// unreachable API server would hold a deposed leader's exit for seconds.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p.start(ctx)
	var leading atomic.Bool
	synced := p.synced()
	serveEndpoints(ctx, opts, c.side.reviews, func() error { return ready(synced, c.consul, leading.Load()) })
	if !cache.WaitForNamedCacheSyncWithContext(ctx, p.bundle.HasSynced) {
		return fmt.Errorf("gateway-api CRD cache did not sync: %w", context.Cause(ctx))
	}

	// Informers warm up in every replica; only the leader runs the writers.
	writers := func(ctx context.Context) error { return p.lead(ctx, eventBroadcaster, &leading) }
	if !opts.LeaderElect {
		metrics.Leader.Set(1)
		return writers(ctx)
	}
	return leader.Run(ctx, c.side.leaderElection, opts.LeaderConfig(), writers)
}

// clients are the controller's connections: to the API server, one client per API
// and the side clients, and to Consul.
type clients struct {
	kube    kubernetes.Interface
	side    sideClients
	gateway gatewayclient.Interface
	meta    metadata.Interface
	configs configclient.Interface
	// dynamic reads consul-k8s's MeshServices; nil when their CRD is not served.
	dynamic dynamic.Interface
	consul  *consulapi.Client
}

// newClients creates the clients, and checks that the API server answers and serves
// the Gateway API and this controller's own API.
func newClients(ctx context.Context, opts *options.Options) (clients, error) {
	var c clients
	cfg, err := clientcmd.BuildConfigFromFlags("", opts.Kubeconfig)
	if err != nil {
		return c, fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = opts.KubeAPIQPS, opts.KubeAPIBurst
	if c.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return c, fmt.Errorf("create kubernetes client: %w", err)
	}
	if c.side, err = newSideClients(cfg, opts); err != nil {
		return c, err
	}
	if c.gateway, err = gatewayclient.NewForConfig(cfg); err != nil {
		return c, fmt.Errorf("create gateway-api client: %w", err)
	}
	if c.meta, err = metadata.NewForConfig(cfg); err != nil {
		return c, fmt.Errorf("create metadata client: %w", err)
	}
	if c.configs, err = configclient.NewForConfig(cfg); err != nil {
		return c, fmt.Errorf("create GatewayConfig client: %w", err)
	}
	if err := checkAPIs(ctx, c.kube, cfg.Host); err != nil {
		return c, err
	}
	if c.dynamic, err = meshServicesClient(ctx, c.kube, cfg); err != nil {
		return c, err
	}
	if c.consul, err = consulapi.NewClient(opts.ConsulConfig()); err != nil {
		return c, fmt.Errorf("create consul client: %w", err)
	}
	return c, nil
}

// resolveClusterID sets an unset --cluster-id to one unique to this cluster: the UID
// of its kube-system Namespace, which lives as long as the cluster. Two clusters
// sharing a Consul then never take each other's entries for their own, which a
// shared default name would make them do. It is read with list, which the
// Namespace informer's grant already allows.
func resolveClusterID(ctx context.Context, opts *options.Options, kube kubernetes.Interface) error {
	logger := klog.FromContext(ctx)
	if opts.ClusterID != "" {
		if opts.ClusterID == options.SharedClusterID && opts.Naming.Prefix == "" {
			logger.Info("Warning: --cluster-id=default with no --consul-entry-prefix: another cluster sharing this Consul with the same settings would change and delete this cluster's entries; leave --cluster-id unset to derive a unique one")
		}
		return nil
	}
	list, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", metav1.NamespaceSystem).String()})
	if err != nil {
		return fmt.Errorf("derive --cluster-id from the %s Namespace: %w", metav1.NamespaceSystem, err)
	}
	if len(list.Items) != 1 || list.Items[0].UID == "" {
		return fmt.Errorf("derive --cluster-id: Namespace %s not found; set --cluster-id", metav1.NamespaceSystem)
	}
	opts.ClusterID = options.ClusterIDOf(list.Items[0].UID)
	logger.Info("Derived the cluster ID from the kube-system Namespace", "clusterID", opts.ClusterID)
	return nil
}

// meshServicesClient returns a client for consul-k8s's MeshServices when the API
// server serves them, and nil otherwise: MeshService backendRefs are then refused,
// with the reason in their status, until the controller restarts with the CRD
// installed. Only a MeshService resource in the group's discovery counts; any other
// discovery error is returned.
func meshServicesClient(ctx context.Context, kube kubernetes.Interface, cfg *rest.Config) (dynamic.Interface, error) {
	resources, err := kube.Discovery().ServerResourcesForGroupVersion(informers.MeshServiceResource.GroupVersion().String())
	switch {
	case apierrors.IsNotFound(err):
		klog.FromContext(ctx).Info("MeshService CRD not served: MeshService backendRefs will be refused", "groupVersion", informers.MeshServiceResource.GroupVersion())
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("discover %s: %w", informers.MeshServiceResource.GroupVersion(), err)
	}
	if !slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == informers.MeshServiceResource.Resource }) {
		klog.FromContext(ctx).Info("MeshService CRD not served: MeshService backendRefs will be refused", "groupVersion", informers.MeshServiceResource.GroupVersion())
		return nil, nil
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create MeshService client: %w", err)
	}
	return client, nil
}

// checkAPIs checks that the API server at host answers, and serves the Gateway API and
// this controller's own API.
func checkAPIs(ctx context.Context, kube kubernetes.Interface, host string) error {
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
	klog.FromContext(ctx).Info("Connected to Kubernetes", "host", host, "version", version.GitVersion)
	return nil
}

// pipeline is the controller's parts, wired together: the informers they share, the
// status controller, the Consul syncer and, when the controller deploys gateways, the
// deployer and the catalog registrar. The informers run in every replica, the writers
// only in the leader (lead).
type pipeline struct {
	informers *informers.Informers
	// meta reads the consistent lists a new leader's caches must catch up with.
	meta       metadata.Interface
	bundle     *informers.BundleVersion
	syncer     *consul.Syncer
	controller *gwsync.Controller
	// serviceNames follows Consul's catalog for MeshServices and renamed backends; nil
	// when Consul namespaces are in use.
	serviceNames *consul.ServiceNames
	// owned, deployer and registrar are nil unless the controller deploys gateways.
	owned     *informers.Owned
	deployer  *dataplane.Controller
	registrar *catalog.Registrar
	// identities is nil unless the controller manages the gateways' ACL identities.
	identities *identity.Manager
	// intentions is nil unless the controller manages intentions (--manage-intentions).
	intentions *intentions.Keeper
}

// newPipeline builds the parts and connects them: the status controller publishes
// what the API server confirmed to the others, and judges again what Consul's
// verdicts, the gateway pods and Services, and the installed CRDs' bundle version
// change.
func newPipeline(ctx context.Context, opts *options.Options, c clients, recorder events.EventRecorder) (*pipeline, error) {
	informerOpts := []informers.Option{
		informers.WithSecretClient(c.side.secrets),
		informers.WithControllerName(gatewayv1.GatewayController(opts.ControllerName)),
		informers.WithSecretsPerNamespace(opts.SecretsPerNamespace),
	}
	if c.dynamic != nil {
		informerOpts = append(informerOpts, informers.WithMeshServices(c.dynamic))
	}
	inf := informers.New(c.kube, c.gateway, c.configs, 0, informerOpts...)
	p := &pipeline{
		informers: inf,
		meta:      c.meta,
		bundle:    informers.NewBundleVersion(c.meta, 0),
	}
	var routes consul.RouteObserver
	if opts.ManageIntentions {
		p.intentions = intentions.NewKeeper(intentions.Config{
			Client:        c.consul,
			Ownership:     opts.Ownership(),
			Partition:     opts.Naming.Partition,
			AllNamespaces: opts.Naming.MirrorNamespaces || opts.Naming.DestinationNamespace != "",
			Workers:       opts.ConsulWorkers,
		})
		routes = p.intentions
	}
	p.syncer = consul.NewSyncer(consul.Config{
		Client:      c.consul,
		Naming:      opts.Naming,
		Ownership:   opts.Ownership(),
		Options:     opts.Translation,
		Secrets:     inf.Secrets.Lister(),
		Services:    inf.Services.Lister(),
		OwnerExists: inf.Exists,
		Workers:     opts.ConsulWorkers,
		Routes:      routes,

		ServiceDefaultsGrace: opts.ServiceDefaultsGrace,
	})
	publishers := gwsync.Publishers{p.syncer}
	var deployments gwsync.GatewayDeployments
	if opts.DeployGateways {
		if err := p.addDataPlane(ctx, opts, c); err != nil {
			return nil, err
		}
		publishers = append(publishers, p.deployer, p.registrar)
		deployments = p.deployer
		if p.identities != nil {
			publishers = append(publishers, p.identities)
			deployments = withIdentities{p.deployer, p.identities}
		}
	}
	// The catalog watch follows the default Consul namespace only: with Enterprise
	// namespaces the service of a MeshService or of renamed pods is not looked up,
	// and counts as held.
	var serviceNames gwsync.ConsulServiceNames
	if !opts.Naming.MirrorNamespaces && opts.Naming.DestinationNamespace == "" {
		p.serviceNames = consul.NewServiceNames(c.consul, opts.Naming.Partition)
		serviceNames = p.serviceNames
	}
	controller, err := gwsync.NewController(ctx, gwsync.Config{
		ControllerName:     gatewayv1.GatewayController(opts.ControllerName),
		Capabilities:       consullimits.Consul115,
		Informers:          gwsync.InformersOf(inf),
		GatewayClient:      c.gateway,
		Publisher:          publishers,
		Verdicts:           p.syncer,
		ServiceNames:       serviceNames,
		Deployments:        deployments,
		InfrastructureKeys: opts.Gateway.InfrastructureKeys,
		SharedConsulNames:  !opts.Naming.MirrorNamespaces,
		Workers:            gwsync.Workers{GatewayClasses: 1, Gateways: opts.GatewayWorkers, Routes: opts.RouteWorkers},
		BundleVersion:      p.bundle.Get,
		Clock:              clock.RealClock{},
		Events:             recorder,
	})
	if err != nil {
		return nil, err
	}
	p.controller = controller
	p.syncer.OnVerdictChange(controller.Enqueue)
	if p.serviceNames != nil {
		p.serviceNames.OnChange(controller.EnqueueConsulService)
	}
	if p.identities != nil {
		p.identities.OnProblemChange(func(gw cache.ObjectName) { controller.Enqueue(gatewayapi.GatewayKind, gw) })
	}
	if p.deployer != nil {
		// An object the deployer may not or cannot write changes no owned object.
		p.deployer.OnProblemChange(func(gw cache.ObjectName) { controller.Enqueue(gatewayapi.GatewayKind, gw) })
	}
	if p.owned != nil {
		// A gateway pod or Service that changes may change its Gateway's status.
		if err := p.owned.AddEventHandlers(ctx, func(gw cache.ObjectName) { controller.Enqueue(gatewayapi.GatewayKind, gw) }); err != nil {
			return nil, err
		}
	}
	if err := p.bundle.OnChange(controller.EnqueueAllGatewayClasses); err != nil {
		return nil, err
	}
	return p, nil
}

// addDataPlane builds the deployer of gateway pods and Services, the registrar of the
// gateway pods in Consul's catalog, and the informers of what they own.
func (p *pipeline) addDataPlane(ctx context.Context, opts *options.Options, c clients) error {
	inf := p.informers
	p.owned = informers.NewOwned(c.kube, dataplane.ManagedSelector, 0)
	deployer, err := dataplane.NewController(ctx, dataplane.Config{
		Client:         c.kube,
		ControllerName: gatewayv1.GatewayController(opts.ControllerName),
		Gateways:       inf.Gateways.Lister(),
		Classes:        inf.GatewayClasses.Lister(),
		Synced:         []cache.InformerSynced{inf.Gateways.Informer().HasSynced, inf.GatewayClasses.Informer().HasSynced},
		Configs:        listers.New[*v1alpha1.GatewayConfig](inf.GatewayConfigs.GetIndexer(), v1alpha1.Resource("gatewayconfigs")),
		Owned:          p.owned,
		Defaults:       opts.GatewayDefaults(),
		FieldManager:   fieldManager,
		Workers:        opts.DataplaneWorkers,
	})
	if err != nil {
		return err
	}
	p.deployer = deployer
	p.registrar = catalog.NewRegistrar(catalog.Config{
		Client:      c.consul,
		Naming:      opts.Naming,
		Ownership:   opts.Ownership(),
		Pods:        p.owned.Pods.Lister(),
		PodsSynced:  p.owned.Pods.Informer().HasSynced,
		GatewayPods: dataplane.PodSelector,
		OwnsPod:     dataplane.OwnsPod,
		InstanceID:  dataplane.ProxyServiceID,
		NodeName:    func(node string) string { return dataplane.SyntheticNode(opts.SyntheticNodePrefix(), node) },
		Workers:     opts.ConsulWorkers,
	})
	if defaults := opts.GatewayDefaults(); defaults.AuthMethod != "" {
		p.identities = identity.NewManager(identity.Config{
			Client:  c.consul,
			Namer:   identity.Namer{Prefix: opts.Naming.Prefix, Ownership: opts.Ownership()},
			Naming:  opts.Naming,
			Classes: inf.GatewayClasses.Lister(),
			Configs: listers.New[*v1alpha1.GatewayConfig](inf.GatewayConfigs.GetIndexer(), v1alpha1.Resource("gatewayconfigs")),
			Pods: func(gw *gatewayv1.Gateway, config *v1alpha1.GatewayConfig) (string, string) {
				return dataplane.Name(gw), dataplane.AuthMethod(config, defaults)
			},
			ServiceAccounts:       p.owned.ServiceAccounts.Lister(),
			ServiceAccountsSynced: p.owned.ServiceAccounts.Informer().HasSynced,
			Workers:               opts.ConsulWorkers,
		})
		// The binding rule names the ServiceAccount's UID: a new one, or one that
		// goes, changes the identity. Other owned objects' events do not.
		if _, err := p.owned.ServiceAccounts.Informer().AddEventHandler(gatewayOfObject(p.identities.Enqueue)); err != nil {
			return fmt.Errorf("add ServiceAccount event handler: %w", err)
		}
	}
	return p.owned.AddEventHandlers(ctx, p.registrar.Enqueue)
}

// gatewayOfObject calls enqueue with the Gateway an owned object is labelled with.
func gatewayOfObject(enqueue func(gateway cache.ObjectName)) cache.ResourceEventHandlerFuncs {
	mapped := func(obj any) {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		object, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		if name := object.GetLabels()[gatewayv1.GatewayNameLabelKey]; name != "" {
			enqueue(cache.ObjectName{Namespace: object.GetNamespace(), Name: name})
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    mapped,
		UpdateFunc: func(_, newObj any) { mapped(newObj) },
		DeleteFunc: mapped,
	}
}

// withIdentities is the data plane's state, where pods that cannot get their identity
// in Consul are a problem of the data plane too: they cannot log in, so they serve
// nothing.
type withIdentities struct {
	*dataplane.Controller
	identities *identity.Manager
}

func (w withIdentities) State(gw *gatewayv1.Gateway) gwsync.DeploymentState {
	state := w.Controller.State(gw)
	if state.Problem == "" {
		if problem := w.identities.Problem(cache.MetaObjectToName(gw)); problem != "" {
			state.Problem = "Gateway pods cannot log in to Consul: " + problem
		}
	}
	return state
}

// start starts the informers; they stop when ctx is done.
func (p *pipeline) start(ctx context.Context) {
	p.informers.StartWithContext(ctx)
	go p.bundle.Run(ctx)
	if p.owned != nil {
		p.owned.StartWithContext(ctx)
	}
}

// synced lists what /readyz waits for: every cache, and the status controller's event
// handlers.
func (p *pipeline) synced() []cache.InformerSynced {
	synced := append(p.informers.HasSynced(), p.bundle.HasSynced, p.controller.HasSynced)
	if p.owned != nil {
		synced = append(synced, p.owned.HasSynced()...)
	}
	return synced
}

// lead runs the writers until ctx is done, and returns once all of them have stopped:
// the Events sink, the status controller, the Consul syncer, when the controller
// deploys gateways the deployer and the registrar, and with --gateway-auth-method the
// identity manager. leading is true meanwhile.
func (p *pipeline) lead(ctx context.Context, eventBroadcaster events.EventBroadcaster, leading *atomic.Bool) error {
	leading.Store(true)
	defer leading.Store(false)
	// A standby's caches may lag what the previous leader saw and wrote; nothing is
	// written from them until they hold what the API server holds now.
	if err := informers.WaitCaughtUp(ctx, p.meta, p.informers.ConsistentCaches()); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if err := eventBroadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return fmt.Errorf("start recording events: %w", err)
	}
	syncerDone := make(chan error, 1)
	go func() { syncerDone <- p.syncer.Run(ctx, p.controller.InitialSyncDone()) }()
	servicesDone := make(chan struct{})
	go func() {
		defer close(servicesDone)
		if p.serviceNames != nil {
			p.serviceNames.Run(ctx)
		}
	}()
	defer func() { <-servicesDone }()
	deployerDone, registrarDone, identitiesDone := make(chan error, 1), make(chan error, 1), make(chan error, 1)
	if p.deployer != nil {
		go func() { deployerDone <- p.deployer.Run(ctx) }()
		go func() { registrarDone <- p.registrar.Run(ctx, p.controller.InitialSyncDone()) }()
	} else {
		deployerDone <- nil
		registrarDone <- nil
	}
	if p.identities != nil {
		go func() { identitiesDone <- p.identities.Run(ctx, p.controller.InitialSyncDone()) }()
	} else {
		identitiesDone <- nil
	}
	intentionsDone := make(chan error, 1)
	if p.intentions != nil {
		go func() { intentionsDone <- p.intentions.Run(ctx) }()
	} else {
		intentionsDone <- nil
	}
	err := p.controller.Run(ctx)
	return errors.Join(err, <-syncerDone, <-deployerDone, <-registrarDone, <-identitiesDone, <-intentionsDone)
}

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
	// reviews checks /metrics' callers; whoever reaches the metrics address can make
	// it call, so it must not take the status writes' budget.
	reviews kubernetes.Interface
	// secrets lists and watches the Secrets listeners name (informers.SecretCache): one
	// watch each, which a tenant's listeners multiply.
	secrets kubernetes.Interface
}

// Renewals come every retry period, so a small budget of their own suffices. Events
// follow status writes (about one per changed object), so they get a budget as large
// as the status writes', in a bucket of their own. A scraper costs two reviews per
// cache time (10 s), so the reviews' small budget serves dozens of scrapers.
const (
	leaderElectionQPS, leaderElectionBurst = 5, 10
	reviewsQPS, reviewsBurst               = 5, 10
)

func newSideClients(cfg *rest.Config, opts *options.Options) (sideClients, error) {
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
	if sc.events, err = client("events", cfg.QPS, cfg.Burst); err != nil {
		return sc, err
	}
	if sc.reviews, err = client("metrics-auth", reviewsQPS, reviewsBurst); err != nil {
		return sc, err
	}
	sc.secrets, err = client("secrets", opts.SecretAPIQPS, opts.SecretAPIBurst)
	return sc, err
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
