package sync

import (
	"context"
	"fmt"
	"slices"
	gosync "sync"

	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/listers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	kworkqueue "k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/metrics"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
	"github.com/consul-gateway-controller/consul-gateway-controller/workqueue"
)

// Workers is the number of workers per kind; Routes is per route kind.
type Workers struct {
	GatewayClasses, Gateways, Routes int
}

// Config is what NewController needs.
type Config struct {
	ControllerName gatewayv1.GatewayController
	Capabilities   consullimits.Capabilities
	// Informers are the caches the controller reads; NewController registers its
	// event handlers on them.
	Informers     Informers
	GatewayClient gatewayclient.Interface
	Publisher     contract.Publisher
	Workers       Workers
	// Verdicts reports Consul's verdicts; nil means none is wired in.
	Verdicts contract.ConsulVerdicts
	// ServiceNames says which services Consul's catalog holds, for MeshServices; nil
	// counts every service as held.
	ServiceNames contract.ConsulServiceNames
	// Deployments reports the gateway pods and Services this controller deploys; nil
	// when it deploys none.
	Deployments contract.GatewayDeployments
	// SharedConsulNames says that Consul knows the Services of one name in every
	// namespace as one service (no namespace mirroring): a backend whose Consul
	// service other namespaces' pods register too is then narrowed to its own
	// namespace's instances (decision.Backend.Narrowed).
	SharedConsulNames bool
	// InfrastructureKeys are the spec.infrastructure keys the deployed objects get
	// (dataplane.Defaults); a Gateway's Accepted message names the others.
	InfrastructureKeys gatewayapi.KeyAllowlist
	// BundleVersion returns the bundle-version annotation of the installed Gateway API
	// CRDs, "" when unknown.
	BundleVersion func() string
	Clock         clock.PassiveClock
	// Events records Events for status transitions; nil records none.
	Events events.EventRecorder
}

// Informers are the shared informers the controller reads: the objects it judges, and
// those their status depends on. Each change to one of them enqueues the objects whose
// status it may change (see addEventHandlers).
type Informers struct {
	GatewayClasses gatewayinformers.GatewayClassInformer
	Gateways       gatewayinformers.GatewayInformer
	ListenerSets   gatewayinformers.ListenerSetInformer
	// Routes holds the informer of each kind of gatewayapi.Routes.
	Routes          map[gatewayv1.Kind]cache.SharedIndexInformer
	ReferenceGrants gatewayinformers.ReferenceGrantInformer
	Namespaces      coreinformers.TypedNamespaceInformer
	Services        coreinformers.TypedServiceInformer
	// Secrets holds the listeners' certificates: the kubernetes.io/tls Secrets some
	// listener names, and only those.
	Secrets        *informers.SecretCache
	GatewayConfigs cache.SharedIndexInformer
	// InjectedPods holds the pods consul-k8s injected, trimmed, with
	// informers.PodConsulServiceIndex: which Consul service a backend Service is.
	InjectedPods cache.SharedIndexInformer
	// MeshServices holds consul-k8s's MeshServices; nil when the CRD is not served,
	// and a MeshService backendRef is refused.
	MeshServices cache.SharedIndexInformer
	// EndpointSlices holds the EndpointSlices of Services without a selector, with
	// informers.EndpointSliceServiceIndex; nil resolves such a Service to its own name.
	EndpointSlices cache.SharedIndexInformer
}

// InformersOf returns the informers of inf the controller reads.
func InformersOf(inf *informers.Informers) Informers {
	return Informers{
		GatewayClasses:  inf.GatewayClasses,
		Gateways:        inf.Gateways,
		ListenerSets:    inf.ListenerSets,
		Routes:          inf.Routes,
		ReferenceGrants: inf.ReferenceGrants,
		Namespaces:      inf.Namespaces,
		Services:        inf.Services,
		Secrets:         inf.Secrets,
		GatewayConfigs:  inf.GatewayConfigs,
		InjectedPods:    inf.InjectedPods,
		MeshServices:    inf.MeshServices,
		EndpointSlices:  inf.EndpointSlices,
	}
}

// Controller writes the status of GatewayClasses, Gateways and routes of our classes
// and publishes what the API server confirmed.
type Controller struct {
	decider
	client        gatewayclient.Interface
	publisher     contract.Publisher
	bundleVersion func() string
	clock         clock.PassiveClock
	informers     Informers
	// keys maps a change to the keys it affects; the event handlers are its.
	keys    *informers.KeyMapper
	workers Workers
	events  *eventEmitter
	// synced holds the HasSynced of every informer and of every event handler
	// NewController registered.
	synced []cache.InformerSynced

	initial *initialSync
	own     *ownWrites

	gatewayClassQueue kworkqueue.TypedRateLimitingInterface[string]
	gatewayQueue      kworkqueue.TypedRateLimitingInterface[cache.ObjectName]
	listenerSetQueue  kworkqueue.TypedRateLimitingInterface[cache.ObjectName]
	// routeQueues holds a queue for each kind of gatewayapi.Routes.
	routeQueues map[gatewayv1.Kind]kworkqueue.TypedRateLimitingInterface[cache.ObjectName]
}

// NewController builds the controller and registers its event handlers, which log
// through ctx's logger.
func NewController(ctx context.Context, cfg Config) (*Controller, error) {
	inf := cfg.Informers
	c := &Controller{
		decider: decider{
			controllerName:     cfg.ControllerName,
			caps:               cfg.Capabilities,
			verdicts:           cfg.Verdicts,
			deployments:        cfg.Deployments,
			infrastructureKeys: cfg.InfrastructureKeys,
			consulServices:     newConsulServices(inf, cfg.SharedConsulNames, cfg.ServiceNames),
			classes:            inf.GatewayClasses.Lister(),
			gateways:           inf.Gateways.Lister(),
			listenerSets:       inf.ListenerSets.Informer().GetIndexer(),
			namespaces:         inf.Namespaces.Lister(),
			services:           inf.Services.Lister(),
			configs:            listers.New[*v1alpha1.GatewayConfig](inf.GatewayConfigs.GetIndexer(), v1alpha1.Resource("gatewayconfigs")),
			refs:               listenerRefs{secrets: inf.Secrets.Lister(), grants: inf.ReferenceGrants.Lister()},
			routeIndexers:      make(map[gatewayv1.Kind]cache.Indexer, len(gatewayapi.Routes)),
			precedence:         newPrecedenceMemo(),
		},
		client:            cfg.GatewayClient,
		publisher:         cfg.Publisher,
		bundleVersion:     cfg.BundleVersion,
		clock:             cfg.Clock,
		informers:         inf,
		workers:           cfg.Workers,
		events:            newEventEmitter(cfg.Events),
		initial:           newInitialSync(),
		own:               newOwnWrites(),
		gatewayClassQueue: workqueue.New[string]("gatewayclass"),
		gatewayQueue:      workqueue.New[cache.ObjectName]("gateway"),
		listenerSetQueue:  workqueue.New[cache.ObjectName]("listenerset"),
		routeQueues:       make(map[gatewayv1.Kind]kworkqueue.TypedRateLimitingInterface[cache.ObjectName], len(gatewayapi.Routes)),
	}
	for _, kind := range gatewayapi.Routes {
		c.routeIndexers[kind.Kind] = inf.Routes[kind.Kind].GetIndexer()
		c.routeQueues[kind.Kind] = workqueue.New[cache.ObjectName](kind.QueueName())
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.verdicts == nil {
		c.verdicts = noVerdicts{}
	}
	if err := c.addEventHandlers(ctx); err != nil {
		return nil, fmt.Errorf("add event handlers: %w", err)
	}
	return c, nil
}

// addEventHandlers registers on every informer the controller reads the handler that
// maps its events to the keys of the objects whose status they may change
// (informers.KeyMapper says which). A handler added to a running informer is first
// handed every cached object as an add.
func (c *Controller) addEventHandlers(ctx context.Context) error {
	inf := c.informers
	c.keys = informers.NewKeyMapper(ctx, informers.Indexes{
		GatewayClasses: inf.GatewayClasses.Informer().GetIndexer(),
		Gateways:       inf.Gateways.Informer().GetIndexer(),
		ListenerSets:   inf.ListenerSets.Informer().GetIndexer(),
		Routes:         c.routeIndexers,
		Services:       inf.Services.Informer().GetIndexer(),
		InjectedPods:   inf.InjectedPods.GetIndexer(),
		MeshServices:   indexerOf(inf.MeshServices),
		EndpointSlices: indexerOf(inf.EndpointSlices),
	}, c.queues())
	keys := c.keys
	type registration struct {
		kind    gatewayv1.Kind
		source  informers.EventSource
		handler cache.ResourceEventHandler
	}
	registrations := []registration{
		{gatewayapi.GatewayClassKind, inf.GatewayClasses.Informer(), keys.GatewayClassHandler()},
		{gatewayapi.GatewayKind, inf.Gateways.Informer(), keys.GatewayHandler()},
		{gatewayapi.GatewayKind, inf.Gateways.Informer(), c.classOfGatewayHandler()},
		{gatewayapi.ListenerSetKind, inf.ListenerSets.Informer(), keys.ListenerSetHandler()},
		{gatewayapi.ReferenceGrantKind, inf.ReferenceGrants.Informer(), keys.ReferenceGrantHandler()},
		{"Namespace", inf.Namespaces.Informer(), keys.NamespaceHandler()},
		// The shared-name answers go stale with any Service or pod event, before its
		// routes are queued.
		{gatewayapi.ServiceKind, inf.Services.Informer(), invalidating(c.consulServices.memo, keys.ServiceHandler())},
		{"Pod", inf.InjectedPods, invalidating(c.consulServices.memo, keys.PodHandler())},
		{gatewayapi.SecretKind, inf.Secrets, keys.SecretHandler()},
		{v1alpha1.GatewayConfigKind, inf.GatewayConfigs, keys.GatewayConfigHandler()},
	}
	for _, kind := range gatewayapi.Routes {
		registrations = append(registrations, registration{kind.Kind, inf.Routes[kind.Kind], keys.RouteHandler(kind)})
	}
	if inf.MeshServices != nil {
		registrations = append(registrations, registration{gatewayapi.MeshServiceKind, inf.MeshServices, keys.MeshServiceHandler()})
	}
	if inf.EndpointSlices != nil {
		registrations = append(registrations, registration{"EndpointSlice", inf.EndpointSlices, keys.EndpointSliceHandler()})
	}
	for _, r := range registrations {
		registration, err := r.source.AddEventHandler(r.handler)
		if err != nil {
			return fmt.Errorf("add %s event handler: %w", r.kind, err)
		}
		c.synced = append(c.synced, r.source.HasSynced, registration.HasSynced)
	}
	return nil
}

// indexerOf is informer's indexer; nil for no informer.
func indexerOf(informer cache.SharedIndexInformer) cache.Indexer {
	if informer == nil {
		return nil
	}
	return informer.GetIndexer()
}

// queues are the controller's work queues, as the event handlers feed them.
func (c *Controller) queues() informers.Queues {
	q := informers.Queues{
		GatewayClasses: c.gatewayClassQueue,
		Gateways:       c.gatewayQueue,
		ListenerSets:   c.listenerSetQueue,
		Routes:         make(map[gatewayv1.Kind]kworkqueue.TypedInterface[cache.ObjectName], len(c.routeQueues)),
	}
	for kind, queue := range c.routeQueues {
		q.Routes[kind] = queue
	}
	return q
}

// HasSynced reports whether every informer the controller reads has synced, and every
// event handler NewController registered has been handed its informer's initial list:
// from then on the key of every object that existed at start-up is in the queues.
func (c *Controller) HasSynced() bool {
	for _, synced := range c.synced {
		if !synced() {
			return false
		}
	}
	return true
}

// Enqueue asks for an object to be judged again, for example when the data plane's
// verdict on it changed.
func (c *Controller) Enqueue(kind gatewayv1.Kind, key cache.ObjectName) {
	if kind == gatewayapi.GatewayKind {
		c.gatewayQueue.Add(key)
		return
	}
	if kind == gatewayapi.ListenerSetKind {
		c.listenerSetQueue.Add(key)
		return
	}
	if queue, ok := c.routeQueues[kind]; ok {
		queue.Add(key)
	}
}

// EnqueueConsulService asks for the routes whose backends are the Consul service name
// to be judged again, when it appears in or leaves Consul's catalog; "" asks it for
// every route (informers.KeyMapper.ConsulServiceChanged).
func (c *Controller) EnqueueConsulService(name string) {
	c.keys.ConsulServiceChanged(name)
}

// EnqueueAllGatewayClasses asks for every class to be judged again, for example when
// the installed CRDs' bundle version changes.
func (c *Controller) EnqueueAllGatewayClasses() {
	for _, key := range c.informers.GatewayClasses.Informer().GetStore().ListKeys() {
		c.gatewayClassQueue.Add(key)
	}
}

// Run waits for the caches, runs the workers until ctx is done, and returns once every
// in-flight sync has finished.
func (c *Controller) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	synced := append(slices.Clone(c.synced), c.verdicts.HasSynced, c.consulServices.catalog.HasSynced)
	if c.deployments != nil {
		synced = append(synced, c.deployments.HasSynced)
	}
	if !cache.WaitForNamedCacheSyncWithContext(ctx, synced...) {
		return fmt.Errorf("caches did not sync: %w", context.Cause(ctx))
	}
	c.initial.expect(c.cachedKeys())
	// The objects gauge is served while this controller writes status: by the leader.
	metrics.SetObjectConditions(c.servedObjectConditions)
	defer metrics.SetObjectConditions(nil)
	logger.Info("Starting status workers", "workers", c.workers, "objects", c.initial.remaining())
	var wg gosync.WaitGroup
	run := wg.Go
	run(func() {
		workqueue.Run(ctx, "gatewayclass", c.gatewayClassQueue, c.workers.GatewayClasses, func(ctx context.Context, name string) error {
			return c.initial.track(gatewayapi.GatewayClassKind, cache.ObjectName{Name: name}, c.syncGatewayClass(ctx, name))
		})
	})
	run(func() {
		workqueue.Run(ctx, "gateway", c.gatewayQueue, c.workers.Gateways, c.tracked(gatewayapi.GatewayKind, c.syncGateway))
	})
	// ListenerSets are judged with their Gateway, and share its number of workers.
	run(func() {
		workqueue.Run(ctx, "listenerset", c.listenerSetQueue, c.workers.Gateways, c.tracked(gatewayapi.ListenerSetKind, c.syncListenerSet))
	})
	for _, kind := range gatewayapi.Routes {
		run(func() {
			workqueue.Run(ctx, kind.QueueName(), c.routeQueues[kind.Kind], c.workers.Routes, c.tracked(kind.Kind, func(ctx context.Context, key cache.ObjectName) error {
				return c.syncRoute(ctx, kind, key)
			}))
		})
	}
	wg.Wait()
	logger.Info("Status workers stopped")
	return nil
}

// InitialSyncDone is closed once every object that was in the caches when they synced
// has been synced once: from then on, an object without a confirmation either does not
// exist or could not be confirmed.
func (c *Controller) InitialSyncDone() <-chan struct{} { return c.initial.done }

func (c *Controller) tracked(kind gatewayv1.Kind, sync workqueue.SyncFunc[cache.ObjectName]) workqueue.SyncFunc[cache.ObjectName] {
	return func(ctx context.Context, key cache.ObjectName) error {
		return c.initial.track(kind, key, sync(ctx, key))
	}
}

// cachedKeys lists every object in the caches the status workers drain.
func (c *Controller) cachedKeys() []objectKey {
	stores := map[gatewayv1.Kind]cache.Store{
		gatewayapi.GatewayClassKind: c.informers.GatewayClasses.Informer().GetStore(),
		gatewayapi.GatewayKind:      c.informers.Gateways.Informer().GetStore(),
		gatewayapi.ListenerSetKind:  c.informers.ListenerSets.Informer().GetStore(),
	}
	for kind, informer := range c.informers.Routes {
		stores[kind] = informer.GetStore()
	}
	var keys []objectKey
	for kind, store := range stores {
		for _, k := range store.ListKeys() {
			name, err := cache.ParseObjectName(k)
			if err == nil {
				keys = append(keys, objectKey{kind, name})
			}
		}
	}
	return keys
}

// servedObjectConditions is objectConditions as the objects gauge serves it; nil when
// the caches cannot be read.
func (c *Controller) servedObjectConditions() map[metrics.ObjectCondition]int {
	counts, err := c.objectConditions()
	if err != nil {
		klog.Background().V(4).Info("Cannot count objects by condition", "err", err)
		return nil
	}
	served := make(map[metrics.ObjectCondition]int, len(counts))
	for k, n := range counts {
		served[metrics.ObjectCondition{Kind: string(k.Kind), Condition: k.Type, Status: k.Status, Reason: k.Reason}] = n
	}
	return served
}
