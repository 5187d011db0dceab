package informers

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// Index names, for Indexer.ByIndex and Indexer.IndexKeys on the informers that carry
// them. Each answers "which objects refer to this one", so an event on the referent
// finds exactly the objects it affects. Values of the "namespace/name" kind are
// cache.ObjectName strings; every namespaced informer also has cache.NamespaceIndex.
const (
	// RouteParentGatewayIndex is on every route kind's informer: the
	// "namespace/name" of every Gateway the route names in a parentRef.
	RouteParentGatewayIndex = "routeParentGateway"
	// routeBackendServiceNameIndex is on every route kind's informer: the name alone of
	// every Service the route names in a backendRef. Without Consul namespace mirroring
	// Consul knows the Services of one name in every namespace as one service, so a
	// Service of that name anywhere can change the route's ResolvedRefs.
	routeBackendServiceNameIndex = "routeBackendServiceName"
	// routeBackendMeshServiceIndex is on every route kind's informer: the
	// "namespace/name" of every MeshService the route names in a backendRef.
	routeBackendMeshServiceIndex = "routeBackendMeshService"
	// ServiceNameIndex is on Services: the name alone, to find the Services of other
	// namespaces that share a Consul name.
	ServiceNameIndex = "serviceName"
	// gatewayClassNameIndex is on Gateways: spec.gatewayClassName.
	gatewayClassNameIndex = "gatewayClassName"
	// GatewayClassNameIndex is gatewayClassNameIndex, for the class sync's
	// gateway-exists finalizer (package sync).
	GatewayClassNameIndex = gatewayClassNameIndex
	// gatewayCertificateSecretIndex is on Gateways: the "namespace/name" of every Secret
	// a listener names in tls.certificateRefs.
	gatewayCertificateSecretIndex = "gatewayCertificateSecret"
	// gatewayClassParametersIndex is on GatewayClasses: the "namespace/name" of the
	// GatewayConfig its parametersRef names.
	gatewayClassParametersIndex = "gatewayClassParameters"
	// gatewayParametersIndex is on Gateways: the "namespace/name" of the GatewayConfig
	// its spec.infrastructure.parametersRef names.
	gatewayParametersIndex = "gatewayParameters"
	// gatewaySelectsNamespacesIndex is on Gateways: selectsNamespacesValue when any listener
	// admits routes by a namespace label selector, and nothing otherwise. Only those
	// gateways can change when a Namespace's labels do.
	gatewaySelectsNamespacesIndex = "gatewaySelectsNamespaces"
	// RouteParentListenerSetIndex is on every route kind's informer: the
	// "namespace/name" of every ListenerSet the route names as a parent.
	RouteParentListenerSetIndex = "routeParentListenerSet"
	// ListenerSetParentGatewayIndex is on ListenerSets: the "namespace/name" of the
	// Gateway spec.parentRef names.
	ListenerSetParentGatewayIndex = "listenerSetParentGateway"
	// listenerSetCertificateSecretIndex is on ListenerSets: the "namespace/name" of
	// every Secret a listener names as a certificate.
	listenerSetCertificateSecretIndex = "listenerSetCertificateSecret"
)

// selectsNamespacesValue is the one value of gatewaySelectsNamespacesIndex.
const selectsNamespacesValue = "true"

// IndexRouteParentGateways is the index function of RouteParentGatewayIndex.
func IndexRouteParentGateways(obj any) ([]string, error) {
	kind, ok := gatewayapi.RouteOf(obj)
	if !ok {
		return nil, unexpectedType(RouteParentGatewayIndex, obj)
	}
	names, err := kind.ParentGateways(obj)
	return nameStrings(names), err
}

// indexRouteBackendServices returns the "namespace/name" of every Service a route names
// in a rule's backendRef.
func indexRouteBackendServices(obj any) ([]string, error) {
	kind, ok := gatewayapi.RouteOf(obj)
	if !ok {
		return nil, unexpectedType(routeBackendServiceNameIndex, obj)
	}
	names, err := kind.BackendServices(obj)
	return nameStrings(names), err
}

// indexRouteBackendMeshServices is the index function of routeBackendMeshServiceIndex.
func indexRouteBackendMeshServices(obj any) ([]string, error) {
	kind, ok := gatewayapi.RouteOf(obj)
	if !ok {
		return nil, unexpectedType(routeBackendMeshServiceIndex, obj)
	}
	names, err := kind.BackendMeshServices(obj)
	return nameStrings(names), err
}

// indexRouteBackendServiceNames is the index function of routeBackendServiceNameIndex.
func indexRouteBackendServiceNames(obj any) ([]string, error) {
	services, err := indexRouteBackendServices(obj)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range services {
		_, name, _ := strings.Cut(s, "/")
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

// IndexServiceName is the index function of ServiceNameIndex.
func IndexServiceName(obj any) ([]string, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return nil, unexpectedType(ServiceNameIndex, obj)
	}
	return []string{svc.Name}, nil
}

// indexGatewayClassName is the index function of gatewayClassNameIndex.
func indexGatewayClassName(obj any) ([]string, error) {
	gateway, ok := obj.(*gatewayv1.Gateway)
	if !ok {
		return nil, unexpectedType(gatewayClassNameIndex, obj)
	}
	if gateway.Spec.GatewayClassName == "" {
		return nil, nil
	}
	return []string{string(gateway.Spec.GatewayClassName)}, nil
}

// indexGatewayCertificateSecrets is the index function of gatewayCertificateSecretIndex.
func indexGatewayCertificateSecrets(obj any) ([]string, error) {
	gateway, ok := obj.(*gatewayv1.Gateway)
	if !ok {
		return nil, unexpectedType(gatewayCertificateSecretIndex, obj)
	}
	return nameStrings(gatewayapi.CertificateSecrets(gateway)), nil
}

// indexGatewayClassParameters is the index function of gatewayClassParametersIndex.
func indexGatewayClassParameters(obj any) ([]string, error) {
	class, ok := obj.(*gatewayv1.GatewayClass)
	if !ok {
		return nil, unexpectedType(gatewayClassParametersIndex, obj)
	}
	return configIndexValue(gatewayapi.ClassParameters(class)), nil
}

// indexGatewayParameters is the index function of gatewayParametersIndex.
func indexGatewayParameters(obj any) ([]string, error) {
	gateway, ok := obj.(*gatewayv1.Gateway)
	if !ok {
		return nil, unexpectedType(gatewayParametersIndex, obj)
	}
	return configIndexValue(gatewayapi.GatewayParameters(gateway)), nil
}

func configIndexValue(ref gatewayapi.ParametersRef, ok bool) []string {
	if !ok || ref.Problem != "" {
		return nil
	}
	return []string{ref.Config.String()}
}

// indexGatewaySelectsNamespaces is the index function of gatewaySelectsNamespacesIndex.
func indexGatewaySelectsNamespaces(obj any) ([]string, error) {
	gateway, ok := obj.(*gatewayv1.Gateway)
	if !ok {
		return nil, unexpectedType(gatewaySelectsNamespacesIndex, obj)
	}
	if !selectsNamespaces(gateway) {
		return nil, nil
	}
	return []string{selectsNamespacesValue}, nil
}

// IndexRouteParentListenerSets is the index function of RouteParentListenerSetIndex.
func IndexRouteParentListenerSets(obj any) ([]string, error) {
	kind, ok := gatewayapi.RouteOf(obj)
	if !ok {
		return nil, unexpectedType(RouteParentListenerSetIndex, obj)
	}
	names, err := kind.ParentListenerSets(obj)
	return nameStrings(names), err
}

// IndexListenerSetParentGateway is the index function of ListenerSetParentGatewayIndex.
func IndexListenerSetParentGateway(obj any) ([]string, error) {
	set, ok := obj.(*gatewayv1.ListenerSet)
	if !ok {
		return nil, unexpectedType(ListenerSetParentGatewayIndex, obj)
	}
	parent, ok := gatewayapi.ListenerSetParent(set)
	if !ok {
		return nil, nil
	}
	return []string{parent.String()}, nil
}

// indexListenerSetCertificateSecrets is the index function of
// listenerSetCertificateSecretIndex.
func indexListenerSetCertificateSecrets(obj any) ([]string, error) {
	set, ok := obj.(*gatewayv1.ListenerSet)
	if !ok {
		return nil, unexpectedType(listenerSetCertificateSecretIndex, obj)
	}
	return nameStrings(gatewayapi.CertificateSecretsOf(set.Namespace, set.Spec.Listeners)), nil
}

// selectsNamespaces reports whether any listener admits routes by namespace labels,
// or the Gateway admits ListenerSets so.
func selectsNamespaces(gateway *gatewayv1.Gateway) bool {
	if allowed := gateway.Spec.AllowedListeners; allowed != nil && allowed.Namespaces != nil && allowed.Namespaces.From != nil &&
		*allowed.Namespaces.From == gatewayv1.NamespacesFromSelector {
		return true
	}
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
