package informers

import (
	"fmt"

	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Index names, for Indexer.ByIndex and Indexer.IndexKeys on the informers that carry
// them. Each answers "which objects refer to this one", so an event on the referent
// finds exactly the objects it affects. Values of the "namespace/name" kind are
// cache.ObjectName strings; every namespaced informer also has cache.NamespaceIndex.
const (
	// RouteParentGatewayIndex is on HTTPRoutes, TCPRoutes and GRPCRoutes: the
	// "namespace/name" of every Gateway the route names in a parentRef.
	RouteParentGatewayIndex = "routeParentGateway"
	// RouteBackendServiceIndex is on HTTPRoutes, TCPRoutes and GRPCRoutes: the
	// "namespace/name" of every Service the route names in a rule's backendRef.
	RouteBackendServiceIndex = "routeBackendService"
	// GatewayClassNameIndex is on Gateways: spec.gatewayClassName.
	GatewayClassNameIndex = "gatewayClassName"
	// GatewayCertificateSecretIndex is on Gateways: the "namespace/name" of every Secret
	// a listener names in tls.certificateRefs.
	GatewayCertificateSecretIndex = "gatewayCertificateSecret"
	// GatewaySelectsNamespacesIndex is on Gateways: SelectsNamespaces when any listener
	// admits routes by a namespace label selector, and nothing otherwise. Only those
	// gateways can change when a Namespace's labels do.
	GatewaySelectsNamespacesIndex = "gatewaySelectsNamespaces"
)

// SelectsNamespaces is the one value of GatewaySelectsNamespacesIndex.
const SelectsNamespaces = "true"

// Defaults the Gateway API applies to a reference whose group or kind is unset.
const (
	coreGroup   = ""
	gatewayKind = "Gateway"
	serviceKind = "Service"
	secretKind  = "Secret"
)

// IndexRouteParentGateways is the index function of RouteParentGatewayIndex.
func IndexRouteParentGateways(obj any) ([]string, error) {
	switch route := obj.(type) {
	case *gatewayv1.HTTPRoute:
		return nameStrings(parentGateways(route.Namespace, route.Spec.ParentRefs)), nil
	case *gatewayv1.TCPRoute:
		return nameStrings(parentGateways(route.Namespace, route.Spec.ParentRefs)), nil
	case *gatewayv1.GRPCRoute:
		return nameStrings(parentGateways(route.Namespace, route.Spec.ParentRefs)), nil
	}
	return nil, unexpectedType(RouteParentGatewayIndex, obj)
}

// IndexRouteBackendServices is the index function of RouteBackendServiceIndex.
func IndexRouteBackendServices(obj any) ([]string, error) {
	switch route := obj.(type) {
	case *gatewayv1.HTTPRoute:
		return nameStrings(HTTPRouteBackendServices(route)), nil
	case *gatewayv1.TCPRoute:
		return nameStrings(TCPRouteBackendServices(route)), nil
	case *gatewayv1.GRPCRoute:
		return nameStrings(GRPCRouteBackendServices(route)), nil
	}
	return nil, unexpectedType(RouteBackendServiceIndex, obj)
}

// IndexGatewayClassName is the index function of GatewayClassNameIndex.
func IndexGatewayClassName(obj any) ([]string, error) {
	gateway, ok := obj.(*gatewayv1.Gateway)
	if !ok {
		return nil, unexpectedType(GatewayClassNameIndex, obj)
	}
	if gateway.Spec.GatewayClassName == "" {
		return nil, nil
	}
	return []string{string(gateway.Spec.GatewayClassName)}, nil
}

// IndexGatewayCertificateSecrets is the index function of GatewayCertificateSecretIndex.
func IndexGatewayCertificateSecrets(obj any) ([]string, error) {
	gateway, ok := obj.(*gatewayv1.Gateway)
	if !ok {
		return nil, unexpectedType(GatewayCertificateSecretIndex, obj)
	}
	return nameStrings(CertificateSecrets(gateway)), nil
}

// IndexGatewaySelectsNamespaces is the index function of GatewaySelectsNamespacesIndex.
func IndexGatewaySelectsNamespaces(obj any) ([]string, error) {
	gateway, ok := obj.(*gatewayv1.Gateway)
	if !ok {
		return nil, unexpectedType(GatewaySelectsNamespacesIndex, obj)
	}
	if !selectsNamespaces(gateway) {
		return nil, nil
	}
	return []string{SelectsNamespaces}, nil
}

// parentGateways returns the Gateways among refs, made by a route in routeNamespace.
func parentGateways(routeNamespace string, refs []gatewayv1.ParentReference) []cache.ObjectName {
	var names nameList
	for _, ref := range refs {
		if !refersTo(ref.Group, ref.Kind, gatewayv1.GroupName, gatewayKind) {
			continue
		}
		names.add(routeNamespace, ref.Namespace, ref.Name)
	}
	return names.list
}

// HTTPRouteBackendServices, TCPRouteBackendServices and GRPCRouteBackendServices return
// the Services a route names as backends, each once. The Consul syncer reads the same
// references from the caches.
func HTTPRouteBackendServices(route *gatewayv1.HTTPRoute) []cache.ObjectName {
	var names nameList
	for _, rule := range route.Spec.Rules {
		for _, ref := range rule.BackendRefs {
			names.addService(route.Namespace, ref.BackendObjectReference)
		}
	}
	return names.list
}

func TCPRouteBackendServices(route *gatewayv1.TCPRoute) []cache.ObjectName {
	var names nameList
	for _, rule := range route.Spec.Rules {
		for _, ref := range rule.BackendRefs {
			names.addService(route.Namespace, ref.BackendObjectReference)
		}
	}
	return names.list
}

func GRPCRouteBackendServices(route *gatewayv1.GRPCRoute) []cache.ObjectName {
	var names nameList
	for _, rule := range route.Spec.Rules {
		for _, ref := range rule.BackendRefs {
			names.addService(route.Namespace, ref.BackendObjectReference)
		}
	}
	return names.list
}

// CertificateSecrets returns the Secrets the gateway's listeners name as certificates.
func CertificateSecrets(gateway *gatewayv1.Gateway) []cache.ObjectName {
	var names nameList
	for _, listener := range gateway.Spec.Listeners {
		if listener.TLS == nil {
			continue
		}
		for _, ref := range listener.TLS.CertificateRefs {
			if !refersTo(ref.Group, ref.Kind, coreGroup, secretKind) {
				continue
			}
			names.add(gateway.Namespace, ref.Namespace, ref.Name)
		}
	}
	return names.list
}

// selectsNamespaces reports whether any listener admits routes by namespace labels.
func selectsNamespaces(gateway *gatewayv1.Gateway) bool {
	for _, listener := range gateway.Spec.Listeners {
		allowed := listener.AllowedRoutes
		if allowed == nil || allowed.Namespaces == nil || allowed.Namespaces.From == nil {
			continue
		}
		if *allowed.Namespaces.From == gatewayv1.NamespacesFromSelector {
			return true
		}
	}
	return false
}

// refersTo reports whether a reference's group and kind, where unset meaning the
// defaults given, are group and kind.
func refersTo(refGroup *gatewayv1.Group, refKind *gatewayv1.Kind, group, kind string) bool {
	if refGroup != nil && string(*refGroup) != group {
		return false
	}
	return refKind == nil || string(*refKind) == kind
}

// nameList collects referenced names in order, each once: a route may name one
// Gateway in several parentRefs (one per sectionName), and a Service in several rules.
type nameList struct {
	list []cache.ObjectName
	seen map[cache.ObjectName]bool
}

// add adds the object called name in namespace, or in defaultNamespace (that of the
// referring object) when namespace is unset.
func (l *nameList) add(defaultNamespace string, namespace *gatewayv1.Namespace, name gatewayv1.ObjectName) {
	ns := defaultNamespace
	if namespace != nil && *namespace != "" {
		ns = string(*namespace)
	}
	objectName := cache.NewObjectName(ns, string(name))
	if l.seen[objectName] {
		return
	}
	if l.seen == nil {
		l.seen = map[cache.ObjectName]bool{}
	}
	l.seen[objectName] = true
	l.list = append(l.list, objectName)
}

// addService adds ref if it names a Service.
func (l *nameList) addService(routeNamespace string, ref gatewayv1.BackendObjectReference) {
	if !refersTo(ref.Group, ref.Kind, coreGroup, serviceKind) {
		return
	}
	l.add(routeNamespace, ref.Namespace, ref.Name)
}

func nameStrings(names []cache.ObjectName) []string {
	if len(names) == 0 {
		return nil
	}
	keys := make([]string, 0, len(names))
	for _, name := range names {
		keys = append(keys, name.String())
	}
	return keys
}

// unexpectedType reports an index registered on the wrong informer. The indexer panics
// on it, which is right: it is a bug in factory.go, not something the cluster can do.
func unexpectedType(index string, obj any) error {
	return fmt.Errorf("index %s: unexpected object type %T", index, obj)
}
