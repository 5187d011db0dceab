package informers

import (
	corev1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/backends"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// This file is what each change affects: the keys KeyMapper's handlers enqueue for it.

// gatewayClassChanged enqueues the class and every Gateway of it, with their routes.
//
// A Gateway's change enqueues no class here: the class sync's gateway-exists
// finalizer depends on which Gateways name the class, and package sync registers a
// handler of its own that enqueues the old and the new class of a Gateway.
func (m *KeyMapper) gatewayClassChanged(class cache.ObjectName) {
	m.queues.GatewayClasses.Add(class.Name)
	for _, gateway := range m.indexed(m.gateways, gatewayClassNameIndex, class.Name) {
		m.enqueueGatewayAndRoutes(gateway)
	}
}

func (m *KeyMapper) gatewayChanged(gateway cache.ObjectName) {
	m.enqueueGatewayAndRoutes(gateway)
}

// enqueueGatewayAndRoutes enqueues the gateway and every route naming it as a parent,
// and its ListenerSets with theirs. A route is judged from its parents' specs, their
// class and the references their listeners resolve, never from their status; so
// whatever may change a gateway's verdict may change its routes' verdicts too, and
// must reach them directly. A ListenerSet's listeners are judged merged with the
// gateway's, so the same holds for them.
func (m *KeyMapper) enqueueGatewayAndRoutes(gateway cache.ObjectName) {
	m.queues.Gateways.Add(gateway)
	m.enqueueRoutesIndexed(RouteParentGatewayIndex, gateway.String())
	for _, set := range m.indexed(m.sets, ListenerSetParentGatewayIndex, gateway.String()) {
		m.enqueueListenerSetAndRoutes(set)
	}
}

// enqueueListenerSetAndRoutes enqueues the ListenerSet and every route naming it as a
// parent.
func (m *KeyMapper) enqueueListenerSetAndRoutes(set cache.ObjectName) {
	m.queues.ListenerSets.Add(set)
	m.enqueueRoutesIndexed(RouteParentListenerSetIndex, set.String())
}

// listenerSetChanged enqueues the parent Gateway of the old and the new ListenerSet
// with everything enqueueGatewayAndRoutes enqueues: the Gateway counts its accepted
// ListenerSets, and listeners of one ListenerSet may conflict with another's. The
// ListenerSet itself and its routes are enqueued even without a parent.
func (m *KeyMapper) listenerSetChanged(obj any) {
	name, err := cache.DeletionHandlingObjectToName(obj)
	if err != nil {
		m.reportUnmapped(err, obj)
		return
	}
	m.enqueueListenerSetAndRoutes(name)
	set, err := objectAs[*gatewayv1.ListenerSet](obj)
	if err != nil {
		return // a tombstone without the object: its Gateway catches up at its next resync
	}
	if parent, ok := gatewayapi.ListenerSetParent(set); ok {
		m.enqueueGatewayAndRoutes(parent)
	}
}

// routeChanged enqueues the route, of kind, in queue, every gateway it names as a
// parent (a gateway's listener status counts the routes attached to it), and the
// other routes of its kind on those parents (enqueueSiblings).
//
// The route's own key comes from the tombstone when the deleted object is unknown, but
// its parents cannot: those gateways catch up at their next resync.
func (m *KeyMapper) routeChanged(kind gatewayapi.RouteKind, queue workqueue.TypedInterface[cache.ObjectName], obj any) {
	name, err := cache.DeletionHandlingObjectToName(obj)
	if err != nil {
		m.reportUnmapped(err, obj)
		return
	}
	queue.Add(name)
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	parents, err := kind.ParentGateways(obj)
	if err != nil {
		m.reportUnmapped(err, obj)
		return
	}
	m.enqueue(m.queues.Gateways, parents)
	// A ListenerSet's listener status counts the routes attached to it.
	sets, err := kind.ParentListenerSets(obj)
	if err != nil {
		m.reportUnmapped(err, obj)
		return
	}
	m.enqueue(m.queues.ListenerSets, sets)
	m.enqueueSiblings(kind, queue, parents, sets)
}

// enqueueSiblings enqueues the routes of kind naming one of parents or sets: which
// rule Consul sends a request to depends on every route of the listener
// (RoutedAsSpecified), so they are judged again when one of them comes, changes or
// goes, and none keeps a condition naming a route that is gone.
func (m *KeyMapper) enqueueSiblings(kind gatewayapi.RouteKind, queue workqueue.TypedInterface[cache.ObjectName], parents, sets []cache.ObjectName) {
	routes := m.routes[kind.Kind]
	for _, gateway := range parents {
		m.enqueue(queue, m.indexed(routes, RouteParentGatewayIndex, gateway.String()))
	}
	for _, set := range sets {
		m.enqueue(queue, m.indexed(routes, RouteParentListenerSetIndex, set.String()))
	}
}

// namespaceChanged enqueues the gateways that select namespaces by label, with their
// routes, and every route in the namespace: whether such a gateway admits a route of
// the namespace depends on the namespace's labels, and the gateway's other routes
// compete with the routes it admits (RoutedAsSpecified).
func (m *KeyMapper) namespaceChanged(namespace cache.ObjectName) {
	for _, gateway := range m.indexed(m.gateways, gatewaySelectsNamespacesIndex, selectsNamespacesValue) {
		m.enqueueGatewayAndRoutes(gateway)
	}
	m.enqueueRoutesIndexed(cache.NamespaceIndex, namespace.Name)
	// Whether a Gateway admits a ListenerSet by selector depends on the labels of the
	// ListenerSet's namespace.
	for _, set := range m.indexed(m.sets, cache.NamespaceIndex, namespace.Name) {
		m.enqueueListenerSetAndRoutes(set)
	}
}

// serviceChanged enqueues every route with a Service of that name as a backend: its
// ResolvedRefs condition depends on the Service existing and, where Consul names
// Services after their name alone, on the Services of that name elsewhere. The Consul
// services the Service's pods register under are shared the same way, so the routes
// of the other Services registering under them are enqueued too (consulNameChanged).
func (m *KeyMapper) serviceChanged(obj any) {
	name, err := cache.DeletionHandlingObjectToName(obj)
	if err != nil {
		m.reportUnmapped(err, obj)
		return
	}
	m.enqueueRoutesIndexed(routeBackendServiceNameIndex, name.Name)
	svc, err := objectAs[*corev1.Service](obj)
	if err != nil {
		return // a tombstone without the object: its pods' Services catch up at resync
	}
	names := map[string]bool{}
	for _, pod := range backends.Registered(svc, m.podsIn(svc.Namespace)) {
		if consulName := pod.Annotations[backends.ServiceAnnotation]; consulName != "" && !names[consulName] {
			names[consulName] = true
			m.consulNameChanged(consulName)
		}
	}
}

// podChanged enqueues the routes whose backend an injected pod may rename or join: the
// routes naming a Service that selects the pod, and, when the pod names its Consul
// service, the routes whose backends are or share that Consul service.
func (m *KeyMapper) podChanged(obj any) {
	pod, err := objectAs[*corev1.Pod](obj)
	if err != nil {
		m.reportUnmapped(err, obj)
		return
	}
	for _, svc := range m.servicesRegistering(pod) {
		m.enqueueRoutesIndexed(routeBackendServiceNameIndex, svc)
	}
	m.endpointServicesOf(cache.MetaObjectToName(pod))
	if consulName := pod.Annotations[backends.ServiceAnnotation]; consulName != "" {
		m.consulNameChanged(consulName)
	}
}

// ConsulServiceChanged enqueues the routes whose backend is the Consul service name,
// which appeared in or left Consul's catalog: those naming a MeshService of it, a
// Service of that name, or a Service whose pods register under it. "" enqueues every
// route.
func (m *KeyMapper) ConsulServiceChanged(name string) {
	if name == "" {
		for kind, routes := range m.routes {
			for _, key := range routes.ListKeys() {
				if n, err := cache.ParseObjectName(key); err == nil {
					m.queues.Routes[kind].Add(n)
				}
			}
		}
		return
	}
	m.consulNameChanged(name)
	if m.meshes == nil {
		return
	}
	for _, mesh := range m.indexed(m.meshes, meshServiceConsulNameIndex, name) {
		m.enqueueRoutesIndexed(routeBackendMeshServiceIndex, mesh.String())
	}
}

// consulNameChanged enqueues the routes whose backend may be the Consul service
// consulName: those naming a Service of that name, and those naming a Service whose
// pods register under it.
func (m *KeyMapper) consulNameChanged(consulName string) {
	names := map[string]bool{consulName: true}
	if m.pods != nil {
		objs, err := m.pods.ByIndex(PodConsulServiceIndex, consulName)
		if err != nil {
			utilruntime.HandleErrorWithLogger(m.logger, err, "Index lookup failed", "index", PodConsulServiceIndex, "value", consulName)
		}
		for _, obj := range objs {
			if pod, ok := obj.(*corev1.Pod); ok {
				for _, svc := range m.servicesRegistering(pod) {
					names[svc] = true
				}
			}
		}
	}
	for name := range names {
		m.enqueueRoutesIndexed(routeBackendServiceNameIndex, name)
	}
}

// servicesRegistering returns the names of the Services of pod's namespace that
// consul-k8s registers pod for.
func (m *KeyMapper) servicesRegistering(pod *corev1.Pod) []string {
	if m.services == nil {
		return nil
	}
	objs, err := m.services.ByIndex(cache.NamespaceIndex, pod.Namespace)
	if err != nil {
		utilruntime.HandleErrorWithLogger(m.logger, err, "Index lookup failed", "index", cache.NamespaceIndex, "value", pod.Namespace)
		return nil
	}
	var names []string
	for _, obj := range objs {
		if svc, ok := obj.(*corev1.Service); ok && len(backends.Registered(svc, []*corev1.Pod{pod})) > 0 {
			names = append(names, svc.Name)
		}
	}
	return names
}

// podsIn returns the cached injected pods of namespace.
func (m *KeyMapper) podsIn(namespace string) []*corev1.Pod {
	if m.pods == nil {
		return nil
	}
	objs, err := m.pods.ByIndex(cache.NamespaceIndex, namespace)
	if err != nil {
		utilruntime.HandleErrorWithLogger(m.logger, err, "Index lookup failed", "index", cache.NamespaceIndex, "value", namespace)
		return nil
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, obj := range objs {
		if pod, ok := obj.(*corev1.Pod); ok {
			pods = append(pods, pod)
		}
	}
	return pods
}

// secretChanged enqueues every gateway with the secret as a listener certificate, with
// their routes: a listener whose certificate does not resolve is not valid.
func (m *KeyMapper) secretChanged(secret cache.ObjectName) {
	for _, gateway := range m.indexed(m.gateways, gatewayCertificateSecretIndex, secret.String()) {
		m.enqueueGatewayAndRoutes(gateway)
	}
	for _, set := range m.indexed(m.sets, listenerSetCertificateSecretIndex, secret.String()) {
		m.enqueueListenerSetParent(set)
	}
}

// enqueueListenerSetParent enqueues the cached ListenerSet's parent Gateway with
// everything enqueueGatewayAndRoutes enqueues (the ListenerSet among them): its
// listeners' validity is part of the merged judgement.
func (m *KeyMapper) enqueueListenerSetParent(set cache.ObjectName) {
	m.enqueueListenerSetAndRoutes(set)
	obj, exists, err := m.sets.GetByKey(set.String())
	if err != nil || !exists {
		return
	}
	if parent, ok := gatewayapi.ListenerSetParent(obj.(*gatewayv1.ListenerSet)); ok {
		m.enqueueGatewayAndRoutes(parent)
	}
}

// gatewayConfigChanged enqueues the classes whose parametersRef names the config, with
// everything gatewayClassChanged enqueues, and the Gateways whose own parametersRef
// names it, with their routes: whether their parameters are valid is part of their
// Accepted condition.
func (m *KeyMapper) gatewayConfigChanged(config cache.ObjectName) {
	for _, class := range m.indexed(m.classes, gatewayClassParametersIndex, config.String()) {
		m.gatewayClassChanged(class)
	}
	for _, gateway := range m.indexed(m.gateways, gatewayParametersIndex, config.String()) {
		m.enqueueGatewayAndRoutes(gateway)
	}
}

// referenceGrantChanged enqueues every object of a kind the grant trusts in the
// namespace it trusts it from (gateways with their routes): a grant is what lets such
// an object refer across namespaces. The old and new grant both come through, so an
// entry removed from spec.from is mapped too. Only Gateway API kinds are mapped; a grant
// from any other group cannot concern them.
func (m *KeyMapper) referenceGrantChanged(obj any) {
	grant, err := objectAs[*gatewayv1.ReferenceGrant](obj)
	if err != nil {
		m.reportUnmapped(err, obj)
		return
	}
	for _, from := range grant.Spec.From {
		if from.Group != gatewayv1.GroupName {
			continue
		}
		namespace := string(from.Namespace)
		if from.Kind == gatewayapi.GatewayKind {
			for _, gateway := range m.indexed(m.gateways, cache.NamespaceIndex, namespace) {
				m.enqueueGatewayAndRoutes(gateway)
			}
			continue
		}
		if from.Kind == gatewayapi.ListenerSetKind {
			for _, set := range m.indexed(m.sets, cache.NamespaceIndex, namespace) {
				m.enqueueListenerSetParent(set)
			}
			continue
		}
		if routes, ok := m.routes[from.Kind]; ok {
			m.enqueue(m.queues.Routes[from.Kind], m.indexed(routes, cache.NamespaceIndex, namespace))
		}
	}
}

// enqueueRoutesIndexed enqueues the routes of every kind whose index holds value.
func (m *KeyMapper) enqueueRoutesIndexed(index, value string) {
	for kind, routes := range m.routes {
		m.enqueue(m.queues.Routes[kind], m.indexed(routes, index, value))
	}
}

func (m *KeyMapper) enqueue(queue workqueue.TypedInterface[cache.ObjectName], names []cache.ObjectName) {
	for _, name := range names {
		queue.Add(name)
	}
}

// indexed returns the names of the objects in indexer whose index holds value.
func (m *KeyMapper) indexed(indexer cache.Indexer, index, value string) []cache.ObjectName {
	keys, err := indexer.IndexKeys(index, value)
	if err != nil {
		utilruntime.HandleErrorWithLogger(m.logger, err, "Index lookup failed", "index", index, "value", value)
		return nil
	}
	names := make([]cache.ObjectName, 0, len(keys))
	for _, key := range keys {
		name, err := cache.ParseObjectName(key)
		if err != nil {
			utilruntime.HandleErrorWithLogger(m.logger, err, "Malformed cache key", "index", index, "key", key)
			continue
		}
		names = append(names, name)
	}
	return names
}
