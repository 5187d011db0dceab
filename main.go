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
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"k8s.io/client-go/listers"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayscheme "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/scheme"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/catalog"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/identity"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/intentions"
	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/buildinfo"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/cli"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/leader"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/metrics"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/options"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
)

func main() {
	// Subcommands come first; without one the binary is the controller, with its flags
	// as they have always been.
	if len(os.Args) > 1 {
		if code, ok := runCommand(os.Args[1], os.Args[2:]); ok {
			os.Exit(code)
		}
	}
	opts, code := parseFlags(os.Args[1:], os.Stderr)
	if opts == nil {
		os.Exit(code)
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

// runCommand runs the command name (a read-only command, or the responder), if it is
// one, and returns its exit code.
func runCommand(name string, args []string) (code int, ok bool) {
	switch name {
	case "version":
		return printVersion(args, os.Stdout, os.Stderr), true
	case "translate":
		return cli.Translate(args, os.Stdin, os.Stdout, os.Stderr), true
	case "responder":
		return runResponder(args, os.Stderr), true
	case "status", "explain", "collect":
		command := map[string]func(context.Context, []string, io.Writer, io.Writer) int{
			"status": cli.Status, "explain": cli.Explain,
			"collect": func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
				return cli.Collect(ctx, buildinfo.Read().String(), args, stdout, stderr)
			},
		}[name]
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return command(ctx, args, os.Stdout, os.Stderr), true
	}
	return 0, false
}

// printVersion writes the build's version line (the version command), which takes no
// arguments.
func printVersion(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "version takes no arguments, got %q\n", args)
		return 2
	}
	fmt.Fprintln(stdout, buildinfo.Read())
	return 0
}

// run connects to the API server and Consul, wires the pipeline, serves the health
// checks, metrics and profiles, starts the informers, and runs the writers while this
// replica leads (throughout, without leader election).
func run(ctx context.Context, opts *options.Options) error {
	build := buildinfo.Read()
	klog.FromContext(ctx).Info("Starting consul-gateway-controller", "version", build.Version, "revision", build.ShortRevision(), "go", build.GoVersion)
	setMemoryLimit(ctx, opts)
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
	return leader.Run(ctx, c.side.leaderElection, leaderConfig(opts), writers)
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
	p := &pipeline{
		informers: newInformers(opts, c),
		meta:      c.meta,
		bundle:    informers.NewBundleVersion(c.meta, 0),
	}
	p.addConsulWriters(opts, c)
	if opts.DeployGateways {
		if err := p.addDataPlane(ctx, opts, c); err != nil {
			return nil, err
		}
	}
	controller, err := gwsync.NewController(ctx, p.controllerConfig(opts, c, recorder))
	if err != nil {
		return nil, err
	}
	p.controller = controller
	if err := p.enqueueOnChanges(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// newInformers builds the informers every part reads from.
func newInformers(opts *options.Options, c clients) *informers.Informers {
	informerOpts := []informers.Option{
		informers.WithSecretClient(c.side.secrets),
		informers.WithControllerName(gatewayv1.GatewayController(opts.ControllerName)),
		informers.WithSecretsPerNamespace(opts.SecretsPerNamespace),
	}
	if c.dynamic != nil {
		informerOpts = append(informerOpts, informers.WithMeshServices(c.dynamic))
	}
	return informers.New(c.kube, c.gateway, c.configs, 0, informerOpts...)
}

// addConsulWriters builds the Consul syncer, with --manage-intentions the intentions
// keeper it tells about routes, and the catalog watch of service names.
func (p *pipeline) addConsulWriters(opts *options.Options, c clients) {
	var routes consul.RouteObserver
	if opts.ManageIntentions {
		p.intentions = intentions.NewKeeper(intentions.Config{
			Client:        c.consul,
			Ownership:     ownership(opts),
			Partition:     opts.Naming.Partition,
			AllNamespaces: opts.Naming.ConsulNamespaces(),
			Workers:       opts.ConsulWorkers,
		})
		routes = p.intentions
	}
	p.syncer = consul.NewSyncer(consul.Config{
		Client:      c.consul,
		Naming:      naming(opts),
		Ownership:   ownership(opts),
		Options:     translateOptions(opts),
		Secrets:     p.informers.Secrets.Lister(),
		Services:    p.informers.Services.Lister(),
		OwnerExists: p.informers.Exists,
		Workers:     opts.ConsulWorkers,
		Routes:      routes,

		ServiceDefaultsGrace: opts.ServiceDefaultsGrace,
	})
	// The catalog watch follows the default Consul namespace only: with Enterprise
	// namespaces the service of a MeshService or of renamed pods is not looked up,
	// and counts as held.
	if !opts.Naming.ConsulNamespaces() {
		p.serviceNames = consul.NewServiceNames(c.consul, opts.Naming.Partition)
	}
}

// controllerConfig is the status controller's configuration: it publishes to the
// Consul syncer and the data plane's parts, and reads their verdicts and states.
func (p *pipeline) controllerConfig(opts *options.Options, c clients, recorder events.EventRecorder) gwsync.Config {
	publishers := contract.Publishers{p.syncer}
	var deployments contract.GatewayDeployments
	if p.deployer != nil {
		publishers = append(publishers, p.deployer, p.registrar)
		deployments = p.deployer
	}
	if p.identities != nil {
		publishers = append(publishers, p.identities)
		deployments = withIdentities{p.deployer, p.identities}
	}
	var serviceNames contract.ConsulServiceNames
	if p.serviceNames != nil {
		serviceNames = p.serviceNames
	}
	return gwsync.Config{
		ControllerName:     gatewayv1.GatewayController(opts.ControllerName),
		Capabilities:       capabilities(opts),
		Informers:          gwsync.InformersOf(p.informers),
		GatewayClient:      c.gateway,
		Publisher:          publishers,
		Verdicts:           p.syncer,
		ServiceNames:       serviceNames,
		Deployments:        deployments,
		InfrastructureKeys: infrastructureKeys(opts),
		SharedConsulNames:  !opts.Naming.MirrorNamespaces,
		Workers:            gwsync.Workers{GatewayClasses: 1, Gateways: opts.GatewayWorkers, Routes: opts.RouteWorkers},
		BundleVersion:      p.bundle.Get,
		Clock:              clock.RealClock{},
		Events:             recorder,
	}
}

// enqueueOnChanges makes the status controller judge a Gateway again when what it
// reads from the other parts changes: Consul's verdicts and service names, the
// gateways' identities and deployments, their pods and Services, and the installed
// CRDs' bundle version.
func (p *pipeline) enqueueOnChanges(ctx context.Context) error {
	enqueueGateway := func(gw cache.ObjectName) { p.controller.Enqueue(gatewayapi.GatewayKind, gw) }
	p.syncer.OnVerdictChange(p.controller.Enqueue)
	if p.serviceNames != nil {
		p.serviceNames.OnChange(p.controller.EnqueueConsulService)
	}
	if p.identities != nil {
		p.identities.OnProblemChange(enqueueGateway)
	}
	if p.deployer != nil {
		// An object the deployer may not or cannot write changes no owned object.
		p.deployer.OnProblemChange(enqueueGateway)
	}
	if p.owned != nil {
		// A gateway pod or Service that changes may change its Gateway's status.
		if err := p.owned.AddEventHandlers(ctx, enqueueGateway); err != nil {
			return err
		}
	}
	return p.bundle.OnChange(p.controller.EnqueueAllGatewayClasses)
}

// addDataPlane builds the deployer of gateway pods and Services, the registrar of the
// gateway pods in Consul's catalog, and the informers of what they own.
func (p *pipeline) addDataPlane(ctx context.Context, opts *options.Options, c clients) error {
	inf := p.informers
	defaults := gatewayDefaults(opts)
	p.owned = informers.NewOwned(c.kube, dataplane.ManagedSelector, 0)
	deployer, err := dataplane.NewController(ctx, dataplane.Config{
		Client:            c.kube,
		ControllerName:    gatewayv1.GatewayController(opts.ControllerName),
		Gateways:          inf.Gateways.Lister(),
		Classes:           inf.GatewayClasses.Lister(),
		Synced:            []cache.InformerSynced{inf.Gateways.Informer().HasSynced, inf.GatewayClasses.Informer().HasSynced},
		Configs:           listers.New[*v1alpha1.GatewayConfig](inf.GatewayConfigs.GetIndexer(), v1alpha1.Resource("gatewayconfigs")),
		Owned:             p.owned,
		Defaults:          defaults,
		FieldManager:      fieldManager,
		Workers:           opts.DataplaneWorkers,
		ImageRolloutLimit: imageRolloutLimit(opts),
	})
	if err != nil {
		return err
	}
	p.deployer = deployer
	p.registrar = catalog.NewRegistrar(catalog.Config{
		Client:      c.consul,
		Naming:      naming(opts),
		Ownership:   ownership(opts),
		Pods:        p.owned.Pods.Lister(),
		PodsSynced:  p.owned.Pods.Informer().HasSynced,
		GatewayPods: dataplane.PodSelector,
		OwnsPod:     dataplane.OwnsPod,
		InstanceID:  dataplane.ProxyServiceID,
		NodeName:    func(node string) string { return dataplane.SyntheticNode(defaults.NodePrefix, node) },
		Workers:     opts.ConsulWorkers,
		// Gateway pods with metrics on (GatewayConfig spec.metrics).
		PrometheusBindAddr: dataplane.PrometheusBindAddr,
	})
	if defaults.AuthMethod != "" {
		p.identities = identity.NewManager(identity.Config{
			Client:  c.consul,
			Namer:   identity.Namer{Prefix: opts.Naming.Prefix, Ownership: ownership(opts)},
			Naming:  naming(opts),
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
// the Events sink, the status controller, and the parts beside it (writers). leading
// is true meanwhile.
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
	return runBeside(ctx, p.controller.Run, p.writers()...)
}

// writers are the parts that write beside the status controller while this replica
// leads: the Consul syncer, the catalog watch of service names, and those the flags
// enable.
func (p *pipeline) writers() []func(context.Context) error {
	initialSync := p.controller.InitialSyncDone()
	writers := []func(context.Context) error{
		func(ctx context.Context) error { return p.syncer.Run(ctx, initialSync) },
	}
	if p.serviceNames != nil {
		writers = append(writers, func(ctx context.Context) error { p.serviceNames.Run(ctx); return nil })
	}
	if p.deployer != nil {
		writers = append(writers, p.deployer.Run, func(ctx context.Context) error { return p.registrar.Run(ctx, initialSync) })
	}
	if p.identities != nil {
		writers = append(writers, func(ctx context.Context) error { return p.identities.Run(ctx, initialSync) })
	}
	if p.intentions != nil {
		writers = append(writers, p.intentions.Run)
	}
	return writers
}

// runBeside runs primary, and each of others in a goroutine of its own, and returns
// once all have returned, with their errors in that order.
func runBeside(ctx context.Context, primary func(context.Context) error, others ...func(context.Context) error) error {
	done := make([]chan error, len(others))
	for i, run := range others {
		done[i] = make(chan error, 1)
		go func() { done[i] <- run(ctx) }()
	}
	errs := []error{primary(ctx)}
	for _, d := range done {
		errs = append(errs, <-d)
	}
	return errors.Join(errs...)
}

// fieldManager names this controller in the managedFields of what it applies.
const fieldManager = "consul-gateway-controller"
