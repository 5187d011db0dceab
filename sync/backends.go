package sync

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewaylisters "sigs.k8s.io/gateway-api/pkg/client/listers/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/backends"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

// backendProblem says why a backendRef cannot be resolved; Reason is one of the Gateway
// API route ResolvedRefs reasons.
type backendProblem struct {
	Reason  gatewayv1.RouteConditionReason // RouteReasonInvalidKind, RouteReasonRefNotPermitted, RouteReasonBackendNotFound, RouteReasonUnsupportedProtocol
	Message string
}

// unsupportedAppProtocols lists, per route kind, the Service port appProtocols that
// Consul 1.15's API gateway cannot speak. For an http-route Consul synthesizes
// service-defaults with protocol "http" for every backend
// (Consul 1.15.4 agent/consul/discoverychain/gateway_httproute.go:103-108, 149-154), so upstreams get
// HTTP/1.1 without TLS to the application, and nothing in agent/xds configures
// WebSocket upgrades. TCP routes forward bytes and accept any appProtocol. GRPCRoute has
// no Consul 1.15 route at all; it is refused where routes bind, not here.
// Values are compared lower-cased: IANA service names are case-insensitive.
var unsupportedAppProtocols = map[gatewayv1.Kind][]string{
	gatewayapi.HTTPRouteKind: {
		"kubernetes.io/h2c", "kubernetes.io/ws", "kubernetes.io/wss", // KEP-3726 standard names
		"https", "http2", "h2c", "grpc", // common unprefixed names for the same needs
	},
}

// resolvedBackend is where a resolved backendRef sends traffic: a Consul service, and
// whether only the referent namespace's instances of it (see narrowed).
type resolvedBackend struct {
	Service  string
	Narrowed bool
	// NarrowedBecause says what else the Consul service holds: instances of other
	// namespaces' pods, or instances registered outside Kubernetes.
	NarrowedBecause string
	// Port and ServiceUID are the Service port the backendRef names and the Service's
	// UID; zero for a MeshService.
	Port       int32
	ServiceUID types.UID
}

// decided is what the backendRef at ref, to referent, resolved to, as the route's
// decision carries it to the translation.
func (r resolvedBackend) decided(ref decision.BackendRefIndex, referent cache.ObjectName, meshService bool) decision.Backend {
	return decision.Backend{
		Ref: ref, Resolved: true, Referent: referent, Consul: r.Service, Port: r.Port,
		MeshService: meshService, Narrowed: r.Narrowed, ServiceUID: r.ServiceUID,
	}
}

// Why a backend is narrowed, as the ResolvedRefs message says it.
const (
	sharedWithOtherNamespaces = "which pods of other namespaces register too"
	sharedOutsideKubernetes   = "which instances registered outside Kubernetes have too"
)

// resolveBackendRef checks one backendRef of a route of routeKind ("HTTPRoute",
// "TCPRoute", "GRPCRoute") in routeNamespace, and returns the Consul service it sends
// traffic to. Only core Services are supported (group "" and kind "Service", the
// defaults): anything else is InvalidKind. A ref to another namespace needs a
// ReferenceGrant, else RefNotPermitted. The Service must exist, else BackendNotFound.
// Port must be set and be one of the Service's ports, else BackendNotFound. A port
// whose appProtocol Consul cannot speak for routeKind is UnsupportedProtocol. The
// Service's injected pods must agree on one Consul service and be registered with the
// port the Service port leads to (package backends). Returns a nil problem when
// resolved. A lister error other than NotFound is returned as error.
//
// The checks run in that order on purpose: the grant is checked before the Service is
// looked up, so a route without permission learns nothing about what exists in the
// other namespace.
func resolveBackendRef(routeKind gatewayv1.Kind, routeNamespace string, ref gatewayv1.BackendObjectReference, services corelisters.ServiceLister, grants gatewaylisters.ReferenceGrantLister, names consulServices) (resolvedBackend, *backendProblem, error) {
	if gatewayapi.IsMeshService(ref) {
		return resolveMeshService(routeKind, routeNamespace, ref, grants, names)
	}
	referent := gatewayapi.Referent(routeNamespace, ref.Namespace, ref.Name)
	namespace, name := referent.Namespace, referent.String()

	if p := backendKindProblem(ref, name); p != nil {
		return resolvedBackend{}, p, nil
	}
	permitted, err := referencePermitted(grants,
		referenceFrom{Group: gatewayv1.GroupName, Kind: string(routeKind), Namespace: routeNamespace},
		referenceTo{Group: gatewayapi.CoreGroup, Kind: gatewayapi.ServiceKind, Namespace: namespace, Name: string(ref.Name)})
	if err != nil {
		return resolvedBackend{}, nil, err
	}
	if !permitted {
		return resolvedBackend{}, &backendProblem{
			Reason:  gatewayv1.RouteReasonRefNotPermitted,
			Message: fmt.Sprintf("backendRef %s is not permitted: no ReferenceGrant in namespace %s allows %s from namespace %s to refer to it", name, namespace, routeKind, routeNamespace),
		}, nil
	}
	svc, err := services.Services(namespace).Get(string(ref.Name))
	if apierrors.IsNotFound(err) {
		return resolvedBackend{}, &backendProblem{
			Reason:  gatewayv1.RouteReasonBackendNotFound,
			Message: fmt.Sprintf("backendRef %s refers to a Service that does not exist", name),
		}, nil
	}
	if err != nil {
		return resolvedBackend{}, nil, fmt.Errorf("get Service %s: %w", name, err)
	}
	if p := servicePortProblem(routeKind, svc, ref.Port, name); p != nil {
		return resolvedBackend{}, p, nil
	}
	resolution, problem, err := names.resolve(name, svc, findServicePort(svc, *ref.Port))
	if err != nil || problem != nil {
		return resolvedBackend{}, problem, err
	}
	// A Service keeping its own name may have instances registered by other means
	// (package backends); a renamed one's instances are its pods, registered by
	// consul-k8s under the new name once they run.
	if resolution.Renamed(svc) && names.catalog != nil && !names.catalog.Known(resolution.Service) {
		return resolvedBackend{}, &backendProblem{
			Reason:  gatewayv1.RouteReasonBackendNotFound,
			Message: fmt.Sprintf("backendRef %s is the Consul service %q (its pods' %s annotation), which Consul's catalog does not hold: none of its pods is registered yet", name, resolution.Service, backends.ServiceAnnotation),
		}, nil
	}
	resolved, problem, err := names.narrowService(resolution.Service, namespace)
	resolved.Port, resolved.ServiceUID = *ref.Port, svc.UID
	return resolved, problem, err
}

// narrowService returns the Consul service a Service backend of namespace is, narrowed
// to that namespace's instances when others share it: pods of other namespaces that
// register it, or instances registered outside Kubernetes (a Service reaches only
// what its own namespace's pods serve; a MeshService names services outside on
// purpose). Only without namespace mirroring: with it, the name is the namespace's.
func (c consulServices) narrowService(consulName, namespace string) (resolvedBackend, *backendProblem, error) {
	_, others, err := c.registering(consulName, namespace)
	if err != nil {
		return resolvedBackend{}, nil, err
	}
	switch {
	case others:
		return resolvedBackend{Service: consulName, Narrowed: true, NarrowedBecause: sharedWithOtherNamespaces}, nil, nil
	case c.shared && c.catalog != nil && c.catalog.RegisteredOutsideKubernetes(consulName):
		return resolvedBackend{Service: consulName, Narrowed: true, NarrowedBecause: sharedOutsideKubernetes}, nil, nil
	}
	return resolvedBackend{Service: consulName}, nil, nil
}

// ReasonPeerNotSupported is the ResolvedRefs reason of a MeshService whose Consul
// service a cluster peer exports: Consul 1.15's routes name services of the local
// datacenter only.
const ReasonPeerNotSupported = "PeerNotSupported"

// resolveMeshService checks a backendRef to a consul-k8s MeshService and returns the
// Consul service it names: the CRD must be served, a ReferenceGrant must allow a
// MeshService of another namespace, the MeshService must exist and name a service of
// the local datacenter that Consul's catalog holds. Its port, which a Consul service
// does not have, is not read. A MeshService names a Consul service on purpose, also
// one registered outside Kubernetes; but where pods of other namespaces register
// that name, it reaches only its own namespace's instances, as a Service does, and
// is not found when its namespace registers none.
func resolveMeshService(routeKind gatewayv1.Kind, routeNamespace string, ref gatewayv1.BackendObjectReference, grants gatewaylisters.ReferenceGrantLister, names consulServices) (resolvedBackend, *backendProblem, error) {
	referent := gatewayapi.Referent(routeNamespace, ref.Namespace, ref.Name)
	name := referent.String()
	if names.meshServices == nil {
		return resolvedBackend{}, &backendProblem{
			Reason:  gatewayv1.RouteReasonInvalidKind,
			Message: fmt.Sprintf("backendRef %s is a MeshService, but the MeshService CRD (meshservices.consul.hashicorp.com) was not served when the controller started: install it (consul-k8s does) and restart the controller", name),
		}, nil
	}
	permitted, err := referencePermitted(grants,
		referenceFrom{Group: gatewayv1.GroupName, Kind: string(routeKind), Namespace: routeNamespace},
		referenceTo{Group: gatewayapi.MeshServiceGroup, Kind: gatewayapi.MeshServiceKind, Namespace: referent.Namespace, Name: referent.Name})
	if err != nil {
		return resolvedBackend{}, nil, err
	}
	if !permitted {
		return resolvedBackend{}, &backendProblem{
			Reason:  gatewayv1.RouteReasonRefNotPermitted,
			Message: fmt.Sprintf("backendRef %s is not permitted: no ReferenceGrant in namespace %s allows %s from namespace %s to refer to the MeshService", name, referent.Namespace, routeKind, routeNamespace),
		}, nil
	}
	spec, found, err := names.meshService(referent)
	if err != nil {
		return resolvedBackend{}, nil, err
	}
	if p := meshServiceProblem(name, spec, found, names.catalog); p != nil {
		return resolvedBackend{}, p, nil
	}
	own, others, err := names.registering(spec.name, referent.Namespace)
	if err != nil || !others {
		return resolvedBackend{Service: spec.name}, nil, err
	}
	if !own {
		return resolvedBackend{}, &backendProblem{
			Reason:  gatewayv1.RouteReasonBackendNotFound,
			Message: fmt.Sprintf("backendRef %s is the Consul service %q, which only pods of other namespaces register in this cluster; a MeshService reaches only its own namespace's pods of such a service, and namespace %s has none", name, spec.name, referent.Namespace),
		}, nil
	}
	return resolvedBackend{Service: spec.name, Narrowed: true, NarrowedBecause: sharedWithOtherNamespaces}, nil, nil
}

// meshServiceProblem says why a MeshService names no Consul service a route can use.
func meshServiceProblem(name string, spec meshServiceSpec, found bool, catalog contract.ConsulServiceNames) *backendProblem {
	switch {
	case !found:
		return &backendProblem{
			Reason:  gatewayv1.RouteReasonBackendNotFound,
			Message: fmt.Sprintf("backendRef %s refers to a MeshService that does not exist", name),
		}
	case spec.name == "":
		return &backendProblem{
			Reason:  gatewayv1.RouteReasonBackendNotFound,
			Message: fmt.Sprintf("backendRef %s refers to a MeshService without spec.name, so it names no Consul service", name),
		}
	case spec.peer != "":
		return &backendProblem{
			Reason:  ReasonPeerNotSupported,
			Message: fmt.Sprintf("backendRef %s is the Consul service %q of the cluster peer %q, but the routes of Consul's API gateway reach only services of the local datacenter", name, spec.name, spec.peer),
		}
	case catalog != nil && !catalog.Known(spec.name):
		return &backendProblem{
			Reason:  gatewayv1.RouteReasonBackendNotFound,
			Message: fmt.Sprintf("backendRef %s is the Consul service %q, which Consul's catalog does not hold: no instance of it is registered", name, spec.name),
		}
	}
	return nil
}

// backendKindProblem accepts only core Services, defaulting group and kind the way the
// CRD does (group "", kind "Service") so objects read without defaulting behave the same.
func backendKindProblem(ref gatewayv1.BackendObjectReference, name string) *backendProblem {
	if gatewayapi.RefersTo(ref.Group, ref.Kind, gatewayapi.CoreGroup, gatewayapi.ServiceKind) {
		return nil
	}
	group, kind := ptr.Deref(ref.Group, gatewayapi.CoreGroup), ptr.Deref(ref.Kind, gatewayapi.ServiceKind)
	groupKind := string(kind)
	if group != "" {
		groupKind += "." + string(group)
	}
	return &backendProblem{
		Reason:  gatewayv1.RouteReasonInvalidKind,
		Message: fmt.Sprintf("backendRef %s has kind %s, but only core Services are supported", name, groupKind),
	}
}

// servicePortProblem checks the Service itself: its type, the port the ref names, and
// that port's appProtocol.
func servicePortProblem(routeKind gatewayv1.Kind, svc *corev1.Service, port *gatewayv1.PortNumber, name string) *backendProblem {
	// The spec says implementations SHOULD NOT support ExternalName Services (they can
	// point outside the cluster, CVE-2021-25740), and Consul has no mesh service behind
	// one. InvalidKind is the reason the spec gives for an unsupported kind of backend.
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return &backendProblem{
			Reason:  gatewayv1.RouteReasonInvalidKind,
			Message: fmt.Sprintf("backendRef %s refers to an ExternalName Service, which is not supported", name),
		}
	}
	if port == nil {
		return &backendProblem{
			Reason:  gatewayv1.RouteReasonBackendNotFound,
			Message: fmt.Sprintf("backendRef %s has no port, but a Service backendRef needs one", name),
		}
	}
	sp := findServicePort(svc, *port)
	if sp == nil {
		return &backendProblem{
			Reason:  gatewayv1.RouteReasonBackendNotFound,
			Message: fmt.Sprintf("backendRef %s names port %d, which the Service does not have", name, *port),
		}
	}
	return appProtocolProblem(routeKind, sp, name)
}

// findServicePort matches the Service port, not the target port: the spec defines
// BackendObjectReference.Port as "the service port number".
func findServicePort(svc *corev1.Service, port int32) *corev1.ServicePort {
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Port == port {
			return &svc.Spec.Ports[i]
		}
	}
	return nil
}

// appProtocolProblem reports a port whose appProtocol Consul cannot speak for the route
// kind. The spec requires UnsupportedProtocol when a route cannot send traffic to the
// backend using the protocol the Service declares.
func appProtocolProblem(routeKind gatewayv1.Kind, sp *corev1.ServicePort, name string) *backendProblem {
	if sp.AppProtocol == nil {
		return nil
	}
	if !slices.Contains(unsupportedAppProtocols[routeKind], strings.ToLower(*sp.AppProtocol)) {
		return nil
	}
	return &backendProblem{
		Reason:  gatewayv1.RouteReasonUnsupportedProtocol,
		Message: fmt.Sprintf("backendRef %s port %d has appProtocol %s, which Consul's API gateway cannot use for a %s", name, sp.Port, *sp.AppProtocol, routeKind),
	}
}
