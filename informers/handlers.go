package informers

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/backends"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// Queues are the work queues the event handlers feed, one per kind with a status to
// write. A key is an object's name; a worker reads the object itself from the lister.
type Queues struct {
	GatewayClasses workqueue.TypedInterface[string] // key: class name
	Gateways       workqueue.TypedInterface[cache.ObjectName]
	ListenerSets   workqueue.TypedInterface[cache.ObjectName]
	// Routes holds a queue for each kind of gatewayapi.Routes.
	Routes map[gatewayv1.Kind]workqueue.TypedInterface[cache.ObjectName]
}

// Indexes are the caches a KeyMapper looks up the objects that refer to a changed
// object in, through the indexes of indexers.go.
type Indexes struct {
	GatewayClasses cache.Indexer
	Gateways       cache.Indexer
	ListenerSets   cache.Indexer
	// Routes holds the indexer of each kind of gatewayapi.Routes.
	Routes map[gatewayv1.Kind]cache.Indexer
	// Services (with ServiceNameIndex) and InjectedPods (with PodConsulServiceIndex)
	// say which Services a pod's change renames; nil Services maps pod events to
	// nothing.
	Services     cache.Indexer
	InjectedPods cache.Indexer
	// MeshServices, with meshServiceConsulNameIndex; nil when not cached.
	MeshServices cache.Indexer
	// EndpointSlices, with EndpointSlicePodIndex: which Services without a selector
	// a pod's change renames; nil maps pod events to none of them.
	EndpointSlices cache.Indexer
}

// indexes returns the indexers of i's informers a KeyMapper looks up.
func (i *Informers) indexes() Indexes {
	idx := Indexes{
		GatewayClasses: i.GatewayClasses.Informer().GetIndexer(),
		Gateways:       i.Gateways.Informer().GetIndexer(),
		ListenerSets:   i.ListenerSets.Informer().GetIndexer(),
		Routes:         make(map[gatewayv1.Kind]cache.Indexer, len(i.Routes)),
		Services:       i.Services.Informer().GetIndexer(),
		InjectedPods:   i.InjectedPods.GetIndexer(),
		EndpointSlices: i.EndpointSlices.GetIndexer(),
	}
	if i.MeshServices != nil {
		idx.MeshServices = i.MeshServices.GetIndexer()
	}
	for kind, informer := range i.Routes {
		idx.Routes[kind] = informer.GetIndexer()
	}
	return idx
}

// KeyMapper makes the event handlers of the status pipeline, one per informer it reads:
// each adds to the queues the key of every object an event may affect, looking up the
// objects that refer to the changed one in the indexes of indexers.go.
//
// The handlers decide nothing: a key enqueued for an object that turns out unaffected
// costs one sync, a key missed costs a stale status until the next resync. So they err
// towards enqueueing, and every update, a periodic resync included, enqueues; the
// exceptions are a Namespace update that leaves its labels alone, the only part of a
// Namespace the controller reads, and a route update that leaves its generation alone,
// which enqueues the route but not its Gateways.
type KeyMapper struct {
	queues   Queues
	classes  cache.Indexer
	gateways cache.Indexer
	sets     cache.Indexer
	routes   map[gatewayv1.Kind]cache.Indexer
	services cache.Indexer
	pods     cache.Indexer
	meshes   cache.Indexer
	slices   cache.Indexer
	logger   klog.Logger
}

// NewKeyMapper returns a KeyMapper looking up idx and feeding q. Its handlers log
// through ctx's logger.
func NewKeyMapper(ctx context.Context, idx Indexes, q Queues) *KeyMapper {
	return &KeyMapper{
		queues:   q,
		classes:  idx.GatewayClasses,
		gateways: idx.Gateways,
		sets:     idx.ListenerSets,
		routes:   idx.Routes,
		services: idx.Services,
		pods:     idx.InjectedPods,
		meshes:   idx.MeshServices,
		slices:   idx.EndpointSlices,
		logger:   klog.FromContext(ctx).WithName("informers"),
	}
}

// GatewayClassHandler is the handler of GatewayClass events: it enqueues the class
// and every Gateway of it, as GatewayHandler does.
func (m *KeyMapper) GatewayClassHandler() cache.ResourceEventHandler {
	return m.forEachName(m.gatewayClassChanged)
}

// GatewayHandler is the handler of Gateway events: it enqueues the Gateway, the routes
// naming it as a parent, and its ListenerSets with their routes.
func (m *KeyMapper) GatewayHandler() cache.ResourceEventHandler {
	return m.forEachName(m.gatewayChanged)
}

// ListenerSetHandler is the handler of ListenerSet events: it enqueues the ListenerSet
// and its routes, and the parent Gateway of the old and the new object as
// GatewayHandler does.
func (m *KeyMapper) ListenerSetHandler() cache.ResourceEventHandler {
	return m.forEachObject(m.listenerSetChanged)
}

// RouteHandler is the handler of the events of routes of kind: it enqueues the route,
// the Gateways and ListenerSets the old and the new route name as parents, and the
// routes of kind naming those; an update that leaves the generation alone enqueues the
// route only.
func (m *KeyMapper) RouteHandler(kind gatewayapi.RouteKind) cache.ResourceEventHandler {
	return m.forEachRoute(kind, m.queues.Routes[kind.Kind])
}

// ReferenceGrantHandler is the handler of ReferenceGrant events: in each namespace the
// old or the new grant trusts a Gateway API kind from, it enqueues the objects of that
// kind: Gateways as GatewayHandler does, ListenerSets with their parent Gateway, routes.
func (m *KeyMapper) ReferenceGrantHandler() cache.ResourceEventHandler {
	return m.forEachObject(m.referenceGrantChanged)
}

// NamespaceHandler is the handler of Namespace events, updates only when they change
// the labels: it enqueues the Gateways that select namespaces by label with their
// routes, the routes in the namespace, and its ListenerSets with their routes.
func (m *KeyMapper) NamespaceHandler() cache.ResourceEventHandler {
	return m.onNamespaceLabels(m.namespaceChanged)
}

// ServiceHandler is the handler of Service events: it enqueues the routes with the
// Service as a backend, and the routes whose backend's Consul service the old or the
// new Service's pods register under.
func (m *KeyMapper) ServiceHandler() cache.ResourceEventHandler {
	return m.forEachObject(m.serviceChanged)
}

// MeshServiceHandler is the handler of MeshService events: it enqueues the routes
// with the MeshService as a backend.
func (m *KeyMapper) MeshServiceHandler() cache.ResourceEventHandler {
	return m.forEachName(func(name cache.ObjectName) {
		m.enqueueRoutesIndexed(routeBackendMeshServiceIndex, name.String())
	})
}

// PodHandler is the handler of the injected pods' events: it enqueues the routes whose
// backends the pod may rename or join (podChanged). An update that changes nothing
// backend resolution reads, the most common kind (status, readiness, resyncs),
// enqueues nothing.
func (m *KeyMapper) PodHandler() cache.ResourceEventHandler {
	handler := m.forEachObject(m.podChanged)
	onUpdate := handler.UpdateFunc
	handler.UpdateFunc = func(oldObj, newObj any) {
		oldPod, okOld := oldObj.(*corev1.Pod)
		newPod, okNew := newObj.(*corev1.Pod)
		if okOld && okNew && backends.SameResolution(oldPod, newPod) {
			return
		}
		onUpdate(oldObj, newObj)
	}
	return handler
}

// SecretHandler is the handler of Secret events: it enqueues the Gateways with the
// Secret as a listener certificate, as GatewayHandler does, and the ListenerSets with
// it, with their parent Gateway.
func (m *KeyMapper) SecretHandler() cache.ResourceEventHandler {
	return m.forEachName(m.secretChanged)
}

// GatewayConfigHandler is the handler of GatewayConfig events: it enqueues the classes
// and the Gateways whose parametersRef names the config, as their own handlers do.
func (m *KeyMapper) GatewayConfigHandler() cache.ResourceEventHandler {
	return m.forEachName(m.gatewayConfigChanged)
}

// EventSource is what event handlers are registered on: a shared informer, or the
// SecretCache.
type EventSource interface {
	AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
	HasSynced() bool
}

// AddEventHandlers registers on every informer of i the handler KeyMapper makes for it,
// feeding q, and adds the handlers' HasSynced to HasSynced. The status controller
// registers the same handlers itself, on the informers its Config names
// (sync.NewController); this registers them all at once.
//
// It may be called before or after Start: a handler added to a running informer is
// first handed every cached object as an add.
// Handlers log through ctx's logger.
func (i *Informers) AddEventHandlers(ctx context.Context, q Queues) error {
	h := i.eventHandlers(ctx, q)
	type registration struct {
		kind    gatewayv1.Kind
		source  EventSource
		handler cache.ResourceEventHandler
	}
	registrations := []registration{
		{gatewayapi.GatewayClassKind, i.GatewayClasses.Informer(), h.gatewayClasses},
		{gatewayapi.GatewayKind, i.Gateways.Informer(), h.gateways},
		{gatewayapi.ListenerSetKind, i.ListenerSets.Informer(), h.listenerSets},
		{gatewayapi.ReferenceGrantKind, i.ReferenceGrants.Informer(), h.referenceGrants},
		{"Namespace", i.Namespaces.Informer(), h.namespaces},
		{gatewayapi.ServiceKind, i.Services.Informer(), h.services},
		{"Pod", i.InjectedPods, h.pods},
		{"EndpointSlice", i.EndpointSlices, h.endpointSlices},
		{gatewayapi.SecretKind, i.Secrets, h.secrets},
		{v1alpha1.GatewayConfigKind, i.GatewayConfigs, h.gatewayConfigs},
	}
	for _, kind := range gatewayapi.Routes {
		registrations = append(registrations, registration{kind.Kind, i.Routes[kind.Kind], h.routes[kind.Kind]})
	}
	if i.MeshServices != nil {
		registrations = append(registrations, registration{gatewayapi.MeshServiceKind, i.MeshServices, h.meshServices})
	}
	synced := make([]cache.InformerSynced, 0, len(registrations))
	for _, r := range registrations {
		registration, err := r.source.AddEventHandler(r.handler)
		if err != nil {
			return fmt.Errorf("add %s event handler: %w", r.kind, err)
		}
		synced = append(synced, registration.HasSynced)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.handlersSynced = append(i.handlersSynced, synced...)
	return nil
}

// eventHandlers holds one handler per informer; tests call them directly.
type eventHandlers struct {
	gatewayClasses  cache.ResourceEventHandler
	gateways        cache.ResourceEventHandler
	listenerSets    cache.ResourceEventHandler
	routes          map[gatewayv1.Kind]cache.ResourceEventHandler
	referenceGrants cache.ResourceEventHandler
	namespaces      cache.ResourceEventHandler
	services        cache.ResourceEventHandler
	pods            cache.ResourceEventHandler
	endpointSlices  cache.ResourceEventHandler
	meshServices    cache.ResourceEventHandler
	secrets         cache.ResourceEventHandler
	gatewayConfigs  cache.ResourceEventHandler
}

func (i *Informers) eventHandlers(ctx context.Context, q Queues) eventHandlers {
	m := NewKeyMapper(ctx, i.indexes(), q)
	h := eventHandlers{
		gatewayClasses:  m.GatewayClassHandler(),
		gateways:        m.GatewayHandler(),
		listenerSets:    m.ListenerSetHandler(),
		routes:          make(map[gatewayv1.Kind]cache.ResourceEventHandler, len(i.Routes)),
		referenceGrants: m.ReferenceGrantHandler(),
		namespaces:      m.NamespaceHandler(),
		services:        m.ServiceHandler(),
		pods:            m.PodHandler(),
		endpointSlices:  m.EndpointSliceHandler(),
		meshServices:    m.MeshServiceHandler(),
		secrets:         m.SecretHandler(),
		gatewayConfigs:  m.GatewayConfigHandler(),
	}
	for _, kind := range gatewayapi.Routes {
		h.routes[kind.Kind] = m.RouteHandler(kind)
	}
	return h
}

// forEachName returns a handler calling changed with the name of the object of every
// add, update and delete. A deletion tombstone's key serves when the deleted object
// is unknown. The old and new objects of an update share their name, so one call
// covers both.
func (m *KeyMapper) forEachName(changed func(cache.ObjectName)) cache.ResourceEventHandlerFuncs {
	call := func(obj any) {
		name, err := cache.DeletionHandlingObjectToName(obj)
		if err != nil {
			m.reportUnmapped(err, obj)
			return
		}
		changed(name)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    call,
		UpdateFunc: func(_, newObj any) { call(newObj) },
		DeleteFunc: call,
	}
}

// forEachObject returns a handler calling changed with the object of every add and
// delete, tombstones included, and with both the old and the new object of every
// update: what an update affects can depend on either, as a route that drops a
// parentRef still affects the gateway it leaves.
func (m *KeyMapper) forEachObject(changed func(obj any)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: changed,
		UpdateFunc: func(oldObj, newObj any) {
			changed(oldObj)
			changed(newObj)
		},
		DeleteFunc: changed,
	}
}

// forEachRoute is forEachObject for a route kind, except that an update leaving the
// generation as it was (a status write, ours included, or a metadata change) enqueues
// the route alone: a Gateway is judged from its routes' specs only, and every route
// status write would otherwise send its Gateways through a sync, at scale thousands
// of them, each racing the Gateway's own status write into a 409.
func (m *KeyMapper) forEachRoute(kind gatewayapi.RouteKind, queue workqueue.TypedInterface[cache.ObjectName]) cache.ResourceEventHandlerFuncs {
	handler := m.forEachObject(func(obj any) { m.routeChanged(kind, queue, obj) })
	onUpdate := handler.UpdateFunc
	handler.UpdateFunc = func(oldObj, newObj any) {
		if generationChanged(oldObj, newObj) {
			onUpdate(oldObj, newObj)
			return
		}
		name, err := cache.ObjectToName(newObj)
		if err != nil {
			m.reportUnmapped(err, newObj)
			return
		}
		queue.Add(name)
	}
	return handler
}

// generationChanged reports whether two versions of an object have different
// generations (the API server's count of spec changes), and true when it cannot tell.
func generationChanged(oldObj, newObj any) bool {
	return metadataDiffers(oldObj, newObj, func(o, n metav1.Object) bool { return o.GetGeneration() != n.GetGeneration() })
}

// onNamespaceLabels is forEachName, except that an update calls changed only when the
// labels changed: labels are all of a Namespace the controller reads, and most
// Namespace updates (annotations, status, resyncs) would otherwise enqueue every route
// of the namespace.
func (m *KeyMapper) onNamespaceLabels(changed func(cache.ObjectName)) cache.ResourceEventHandlerFuncs {
	handler := m.forEachName(changed)
	onUpdate := handler.UpdateFunc
	handler.UpdateFunc = func(oldObj, newObj any) {
		if !labelsChanged(oldObj, newObj) {
			return
		}
		onUpdate(oldObj, newObj)
	}
	return handler
}

// labelsChanged reports whether two versions of an object have different labels, and
// true when it cannot tell: enqueueing too much is the safe mistake.
func labelsChanged(oldObj, newObj any) bool {
	return metadataDiffers(oldObj, newObj, func(o, n metav1.Object) bool { return !maps.Equal(o.GetLabels(), n.GetLabels()) })
}

// metadataDiffers applies differ to the metadata of two versions of an object, and
// reports true when either has none.
func metadataDiffers(oldObj, newObj any, differ func(oldMeta, newMeta metav1.Object) bool) bool {
	oldMeta, err := meta.Accessor(oldObj)
	if err != nil {
		return true
	}
	newMeta, err := meta.Accessor(newObj)
	if err != nil {
		return true
	}
	return differ(oldMeta, newMeta)
}

func (m *KeyMapper) reportUnmapped(err error, obj any) {
	utilruntime.HandleErrorWithLogger(m.logger, err, "Event not mapped to queue keys", "type", fmt.Sprintf("%T", obj))
}

// objectAs returns obj as a T, unwrapping a deletion tombstone.
func objectAs[T any](obj any) (T, error) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	typed, ok := obj.(T)
	if !ok {
		var zero T
		return zero, fmt.Errorf("expected %T, got %T", zero, obj)
	}
	return typed, nil
}
