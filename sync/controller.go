package sync

import (
	"context"
	"fmt"
	"slices"
	"strings"
	gosync "sync"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
	Publisher     Publisher
	Workers       Workers
	// Verdicts reports Consul's verdicts; nil means none is wired in.
	Verdicts ConsulVerdicts
	// Deployments reports the gateway pods and Services this controller deploys; nil
	// when it deploys none.
	Deployments GatewayDeployments
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
	// Secrets holds the listeners' certificates (kubernetes.io/tls Secrets only).
	Secrets        coreinformers.TypedSecretInformer
	GatewayConfigs cache.SharedIndexInformer
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
	}
}

// Controller writes the status of GatewayClasses, Gateways and routes of our classes
// and publishes what the API server confirmed.
type Controller struct {
	decider
	client        gatewayclient.Interface
	publisher     Publisher
	bundleVersion func() string
	clock         clock.PassiveClock
	informers     Informers
	workers       Workers
	events        *eventEmitter
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
			controllerName: cfg.ControllerName,
			caps:           cfg.Capabilities,
			verdicts:       cfg.Verdicts,
			deployments:    cfg.Deployments,
			classes:        inf.GatewayClasses.Lister(),
			gateways:       inf.Gateways.Lister(),
			listenerSets:   inf.ListenerSets.Informer().GetIndexer(),
			namespaces:     inf.Namespaces.Lister(),
			services:       inf.Services.Lister(),
			configs:        listers.New[*v1alpha1.GatewayConfig](inf.GatewayConfigs.GetIndexer(), v1alpha1.Resource("gatewayconfigs")),
			refs:           listenerRefs{secrets: inf.Secrets.Lister(), grants: inf.ReferenceGrants.Lister()},
			routeIndexers:  make(map[gatewayv1.Kind]cache.Indexer, len(gatewayapi.Routes)),
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
	keys := informers.NewKeyMapper(ctx, informers.Indexes{
		GatewayClasses: inf.GatewayClasses.Informer().GetIndexer(),
		Gateways:       inf.Gateways.Informer().GetIndexer(),
		ListenerSets:   inf.ListenerSets.Informer().GetIndexer(),
		Routes:         c.routeIndexers,
	}, c.queues())
	type registration struct {
		kind     gatewayv1.Kind
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}
	registrations := []registration{
		{gatewayapi.GatewayClassKind, inf.GatewayClasses.Informer(), keys.GatewayClassHandler()},
		{gatewayapi.GatewayKind, inf.Gateways.Informer(), keys.GatewayHandler()},
		{gatewayapi.ListenerSetKind, inf.ListenerSets.Informer(), keys.ListenerSetHandler()},
		{gatewayapi.ReferenceGrantKind, inf.ReferenceGrants.Informer(), keys.ReferenceGrantHandler()},
		{"Namespace", inf.Namespaces.Informer(), keys.NamespaceHandler()},
		{gatewayapi.ServiceKind, inf.Services.Informer(), keys.ServiceHandler()},
		{gatewayapi.SecretKind, inf.Secrets.Informer(), keys.SecretHandler()},
		{v1alpha1.GatewayConfigKind, inf.GatewayConfigs, keys.GatewayConfigHandler()},
	}
	for _, kind := range gatewayapi.Routes {
		registrations = append(registrations, registration{kind.Kind, inf.Routes[kind.Kind], keys.RouteHandler(kind)})
	}
	for _, r := range registrations {
		registration, err := r.informer.AddEventHandler(r.handler)
		if err != nil {
			return fmt.Errorf("add %s event handler: %w", r.kind, err)
		}
		c.synced = append(c.synced, r.informer.HasSynced, registration.HasSynced)
	}
	return nil
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
	synced := append(slices.Clone(c.synced), c.verdicts.HasSynced)
	if c.deployments != nil {
		synced = append(synced, c.deployments.HasSynced)
	}
	if !cache.WaitForNamedCacheSyncWithContext(ctx, synced...) {
		return fmt.Errorf("caches did not sync: %w", context.Cause(ctx))
	}
	c.initial.expect(c.cachedKeys())
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

func (c *Controller) now() metav1.Time {
	return metav1.NewTime(c.clock.Now().Truncate(time.Second))
}

func (c *Controller) syncGatewayClass(ctx context.Context, name string) error {
	key := cache.ObjectName{Name: name}
	class, err := c.classes.Get(name)
	if apierrors.IsNotFound(err) {
		c.gone(ctx, gatewayapi.GatewayClassKind, key)
		return nil
	}
	if err != nil {
		return err
	}
	if class.Spec.ControllerName != c.controllerName {
		return nil // another controller's class: never touched, never published
	}
	params, err := c.classParameters(class)
	if err != nil {
		return err
	}
	status := gatewayClassStatus(class, params, c.bundleVersion(), c.caps, c.now())
	return c.confirm(ctx, Confirmation{Kind: gatewayapi.GatewayClassKind}, class, apiequality.Semantic.DeepEqual(status, class.Status), func() (runtime.Object, error) {
		update := class.DeepCopy()
		update.Status = status
		return c.client.GatewayV1().GatewayClasses().UpdateStatus(ctx, update, metav1.UpdateOptions{})
	})
}

func (c *Controller) syncGateway(ctx context.Context, key cache.ObjectName) error {
	gw, err := c.gateways.Gateways(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		c.gone(ctx, gatewayapi.GatewayKind, key)
		return nil
	}
	if err != nil {
		return err
	}
	class, ours, err := c.ourClass(string(gw.Spec.GatewayClassName))
	if err != nil {
		return err
	}
	if !ours {
		// Not ours (any more): what was derived from it must go, its status is not ours
		// to write.
		c.publisher.Publish(ctx, Confirmation{Kind: gatewayapi.GatewayKind, Key: key})
		return nil
	}
	status, err := c.gatewayStatus(gw, class, c.now())
	if err != nil {
		return err
	}
	return c.confirm(ctx, Confirmation{Kind: gatewayapi.GatewayKind}, gw, apiequality.Semantic.DeepEqual(status, gw.Status), func() (runtime.Object, error) {
		update := gw.DeepCopy()
		update.Status = status
		return c.client.GatewayV1().Gateways(gw.Namespace).UpdateStatus(ctx, update, metav1.UpdateOptions{})
	})
}

// syncListenerSet judges one ListenerSet. Only a ListenerSet whose parent is a Gateway
// of ours is ours: another's is never touched, and one that stops being ours keeps the
// status it has, as a route does for a parent that is not ours.
func (c *Controller) syncListenerSet(ctx context.Context, key cache.ObjectName) error {
	obj, exists, err := c.listenerSets.GetByKey(key.String())
	if err != nil {
		return fmt.Errorf("get ListenerSet %s from cache: %w", key, err)
	}
	if !exists {
		c.gone(ctx, gatewayapi.ListenerSetKind, key)
		return nil
	}
	set, ok := obj.(*gatewayv1.ListenerSet)
	if !ok {
		return fmt.Errorf("ListenerSet cache holds %T", obj)
	}
	gw, class, ours, err := c.parentGatewayOf(set)
	if err != nil {
		return err
	}
	if !ours {
		c.publisher.Publish(ctx, Confirmation{Kind: gatewayapi.ListenerSetKind, Key: key})
		return nil
	}
	status, err := c.listenerSetStatus(set, gw, class, c.now())
	if err != nil {
		return err
	}
	return c.confirm(ctx, Confirmation{Kind: gatewayapi.ListenerSetKind}, set, apiequality.Semantic.DeepEqual(status, set.Status), func() (runtime.Object, error) {
		update := set.DeepCopy()
		update.Status = status
		return c.client.GatewayV1().ListenerSets(set.Namespace).UpdateStatus(ctx, update, metav1.UpdateOptions{})
	})
}

// syncRoute judges one route of kind.
func (c *Controller) syncRoute(ctx context.Context, kind gatewayapi.RouteKind, key cache.ObjectName) error {
	obj, exists, err := c.routeIndexers[kind.Kind].GetByKey(key.String())
	if err != nil {
		return fmt.Errorf("get %s %s from cache: %w", kind.Kind, key, err)
	}
	if !exists {
		c.gone(ctx, kind.Kind, key)
		return nil
	}
	r, ok := obj.(gatewayapi.Object)
	if !ok {
		return fmt.Errorf("%s cache holds %T", kind.Kind, obj)
	}
	existing := kind.Parents(r)
	computed, decision, err := c.routeStatus(ctx, r, existing, r.GetGeneration())
	if err != nil {
		return err
	}
	return c.confirmRoute(ctx, Confirmation{Kind: kind.Kind, Route: decision}, r, computed, existing, func() (runtime.Object, error) {
		return kind.UpdateParents(ctx, c.client, r, computed)
	})
}

// routeStatus computes a route's status.parents and logs each parent that did not
// accept it.
func (c *Controller) routeStatus(ctx context.Context, obj metav1.Object, existing []gatewayv1.RouteParentStatus, generation int64) ([]gatewayv1.RouteParentStatus, *RouteDecision, error) {
	view, rules, err := c.viewRoute(obj)
	if err != nil {
		return nil, nil, err
	}
	parents, decision, err := c.routeParentStatuses(view, rules, existing, generation, c.now())
	if err != nil {
		return nil, nil, err
	}
	logger := klog.FromContext(ctx)
	if logger.V(4).Enabled() {
		for _, p := range parents {
			accepted := findCondition(p.Conditions, string(gatewayv1.RouteConditionAccepted))
			if p.ControllerName == c.controllerName && accepted != nil && accepted.Status != metav1.ConditionTrue {
				logger.V(4).Info("Route not accepted by parent", "kind", view.kind, "route", klog.KObj(obj),
					"parent", p.ParentRef.Name, "sectionName", p.ParentRef.SectionName, "reason", accepted.Reason, "message", accepted.Message)
			}
		}
	}
	return parents, &decision, nil
}

// confirmRoute writes a route's parents when they changed. A route none of whose
// parents is ours, before and after, is not ours: nothing is written or published.
func (c *Controller) confirmRoute(ctx context.Context, conf Confirmation, route runtime.Object, parents, existing []gatewayv1.RouteParentStatus, update func() (runtime.Object, error)) error {
	if !c.hasOurParent(parents) && !c.hasOurParent(existing) {
		c.publisher.Publish(ctx, Confirmation{Kind: conf.Kind, Key: objectName(route)})
		return nil
	}
	return c.confirm(ctx, conf, route, apiequality.Semantic.DeepEqual(parents, existing), update)
}

func (c *Controller) hasOurParent(parents []gatewayv1.RouteParentStatus) bool {
	for _, p := range parents {
		if p.ControllerName == c.controllerName {
			return true
		}
	}
	return false
}

// gone publishes the removal of an object that is no longer in the cache.
func (c *Controller) gone(ctx context.Context, kind gatewayv1.Kind, key cache.ObjectName) {
	c.own.forget(objectKey{kind, key})
	c.publisher.Publish(ctx, Confirmation{Kind: kind, Key: key})
}

// confirm publishes current when its stored status is already the computed one, and
// otherwise writes the status and publishes what the server returned. The write
// carries the lister's resourceVersion; a Conflict is returned as is, so the worker
// requeues the key and the informer's newer object is judged next time. No GET, no
// retry here. A NotFound means the object was deleted meanwhile: not an error.
//
// A cache that has not yet seen our last write of the object is not judged at all:
// the write's own event brings the key back (see ownWrites).
func (c *Controller) confirm(ctx context.Context, conf Confirmation, current runtime.Object, unchanged bool, update func() (runtime.Object, error)) error {
	conf.Key = objectName(current)
	key := objectKey{conf.Kind, conf.Key}
	cachedVersion := resourceVersion(current)
	if c.own.cacheBehind(key, cachedVersion) {
		klog.FromContext(ctx).V(4).Info("Cache has not seen our last status write yet; waiting for its event", "kind", conf.Kind, "object", conf.Key)
		return nil
	}
	if unchanged {
		conf.Object = current
		c.publish(ctx, conf)
		return nil
	}
	updated, err := update()
	metrics.StatusWrites.WithLabelValues(string(conf.Kind), metrics.Result(err)).Inc()
	if apierrors.IsNotFound(err) {
		// Deleted during the sync: its delete event brings the key back, and the sync
		// then finds it gone and publishes its removal. Nothing to retry.
		klog.FromContext(ctx).V(4).Info("Object deleted during the sync; status not written", "kind", conf.Kind, "object", conf.Key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("update status of %s %s: %w", conf.Kind, conf.Key, err)
	}
	c.own.wrote(key, cachedVersion)
	klog.FromContext(ctx).V(2).Info("Status updated", "kind", conf.Kind, "object", conf.Key, "status", describeStatus(updated, c.controllerName))
	c.events.emit(ctx, updated, statusEvents(current, updated, c.controllerName))
	conf.Object = updated
	c.publish(ctx, conf)
	return nil
}

// publish hands a confirmation to the syncers; one that must not be served (withheld)
// goes as a removal, so nothing derived from it stays in Consul or the data plane.
func (c *Controller) publish(ctx context.Context, conf Confirmation) {
	if conf.Object != nil && withheld(conf.Object) {
		klog.FromContext(ctx).V(4).Info("Confirmed object withheld from the syncers; its status says why", "kind", conf.Kind, "object", conf.Key)
		conf.Object, conf.Route = nil, nil
	}
	c.publisher.Publish(ctx, conf)
}

func resourceVersion(obj runtime.Object) string {
	o, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return o.GetResourceVersion()
}

func objectName(obj runtime.Object) cache.ObjectName {
	o, err := meta.Accessor(obj)
	if err != nil {
		return cache.ObjectName{}
	}
	return cache.MetaObjectToName(o)
}

// describeStatus is a one-line account of the status we wrote, for the log.
func describeStatus(obj runtime.Object, controller gatewayv1.GatewayController) string {
	var parts []string
	switch o := obj.(type) {
	case *gatewayv1.GatewayClass:
		parts = append(parts, describeConditions(o.Status.Conditions))
	case *gatewayv1.Gateway:
		parts = append(parts, describeConditions(o.Status.Conditions))
		for _, l := range o.Status.Listeners {
			parts = append(parts, fmt.Sprintf("listener %s: %s attachedRoutes=%d", l.Name, describeConditions(l.Conditions), l.AttachedRoutes))
		}
	case *gatewayv1.ListenerSet:
		parts = append(parts, describeConditions(o.Status.Conditions))
		for _, l := range o.Status.Listeners {
			parts = append(parts, fmt.Sprintf("listener %s: %s attachedRoutes=%d", l.Name, describeConditions(l.Conditions), l.AttachedRoutes))
		}
	default:
		if kind, ok := gatewayapi.RouteOf(obj); ok {
			parts = describeParents(kind.Parents(obj), controller)
		}
	}
	return strings.Join(parts, "; ")
}

func describeParents(parents []gatewayv1.RouteParentStatus, controller gatewayv1.GatewayController) []string {
	var parts []string
	for _, p := range parents {
		if p.ControllerName != controller {
			continue
		}
		name := string(p.ParentRef.Name)
		if p.ParentRef.SectionName != nil {
			name += "/" + string(*p.ParentRef.SectionName)
		}
		parts = append(parts, fmt.Sprintf("parent %s: %s", name, describeConditions(p.Conditions)))
	}
	if len(parts) == 0 {
		parts = append(parts, "no parent of ours")
	}
	return parts
}

func describeConditions(conds []metav1.Condition) string {
	parts := make([]string, len(conds))
	for i, c := range conds {
		parts[i] = fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason)
	}
	return strings.Join(parts, " ")
}
