package gatewayapi

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions/apis/v1"
)

// RouteKind is one route kind as the controller sees it: where its objects are cached,
// what it reads of their spec, and how their status.parents is read and written. It
// holds no state; every function takes the object it reads.
type RouteKind struct {
	Kind gatewayv1.Kind
	// Informer returns the kind's shared informer; calling it registers the informer
	// with the factory behind v1.
	Informer func(v1 gatewayinformers.Interface) cache.SharedIndexInformer
	// Spec returns what the controller reads of obj's spec, and an error when obj is
	// not of this kind.
	Spec func(obj any) (RouteSpec, error)
	// Parents returns obj's status.parents; nil when obj is nil or of another kind.
	Parents func(obj runtime.Object) []gatewayv1.RouteParentStatus
	// UpdateParents writes a copy of obj with parents as its status.parents to the
	// status subresource, carrying obj's resourceVersion, and returns the object the
	// API server returned.
	UpdateParents func(ctx context.Context, client gatewayclient.Interface, obj runtime.Object, parents []gatewayv1.RouteParentStatus) (runtime.Object, error)
	// WithParents returns a copy of obj with parents as its status.parents, as a
	// status write would store it (for judging without an API server).
	WithParents func(obj runtime.Object, parents []gatewayv1.RouteParentStatus) (runtime.Object, error)

	is func(obj any) bool
}

// RouteSpec is what the controller reads of a route's spec, whatever its kind.
type RouteSpec struct {
	ParentRefs []gatewayv1.ParentReference
	// Hostnames is nil for kinds without spec.hostnames.
	Hostnames []gatewayv1.Hostname
	// BackendRefs holds each rule's backendRefs, rule by rule: its length is the
	// number of rules.
	BackendRefs [][]gatewayv1.BackendObjectReference
}

// QueueName is the name of the kind's work queue, and of its metrics.
func (k RouteKind) QueueName() string { return strings.ToLower(string(k.Kind)) }

// ParentGateways returns the Gateways obj names in its parentRefs, each once.
func (k RouteKind) ParentGateways(obj any) ([]cache.ObjectName, error) {
	return k.parents(obj, IsGateway)
}

// ParentListenerSets returns the ListenerSets obj names in its parentRefs, each once.
func (k RouteKind) ParentListenerSets(obj any) ([]cache.ObjectName, error) {
	return k.parents(obj, IsListenerSet)
}

// parents returns the parents of obj of the kind is selects, each once.
func (k RouteKind) parents(obj any, is func(gatewayv1.ParentReference) bool) ([]cache.ObjectName, error) {
	spec, err := k.Spec(obj)
	if err != nil {
		return nil, err
	}
	route, err := objectMeta(obj)
	if err != nil {
		return nil, err
	}
	var names nameSet
	for _, ref := range spec.ParentRefs {
		if is(ref) {
			names.add(Referent(route.GetNamespace(), ref.Namespace, ref.Name))
		}
	}
	return names.list, nil
}

// BackendServices returns the Services obj names as backends, each once.
func (k RouteKind) BackendServices(obj any) ([]cache.ObjectName, error) {
	return k.backends(obj, func(ref gatewayv1.BackendObjectReference) bool {
		return RefersTo(ref.Group, ref.Kind, CoreGroup, ServiceKind)
	})
}

// BackendMeshServices returns the MeshServices obj names as backends, each once.
func (k RouteKind) BackendMeshServices(obj any) ([]cache.ObjectName, error) {
	return k.backends(obj, IsMeshService)
}

// backends returns the backends of obj that is selects, each once.
func (k RouteKind) backends(obj any, is func(gatewayv1.BackendObjectReference) bool) ([]cache.ObjectName, error) {
	spec, err := k.Spec(obj)
	if err != nil {
		return nil, err
	}
	route, err := objectMeta(obj)
	if err != nil {
		return nil, err
	}
	var names nameSet
	for _, rule := range spec.BackendRefs {
		for _, ref := range rule {
			if is(ref) {
				names.add(Referent(route.GetNamespace(), ref.Namespace, ref.Name))
			}
		}
	}
	return names.list, nil
}

// The kinds of Routes.
const (
	HTTPRouteKind = "HTTPRoute"
	TCPRouteKind  = "TCPRoute"
	GRPCRouteKind = "GRPCRoute"
	TLSRouteKind  = "TLSRoute"
	UDPRouteKind  = "UDPRoute"
)

// Routes are the route kinds the controller judges, in a fixed order. Adding a kind
// here gives it an informer, indexes, event handlers, a status queue and workers, and
// a place in the Consul syncer; its decisions (package sync) and its translation
// (package consul) are what is left to write.
var Routes = []RouteKind{
	routeAccess[*gatewayv1.HTTPRoute]{
		kind:     HTTPRouteKind,
		informer: func(v1 gatewayinformers.Interface) cache.SharedIndexInformer { return v1.HTTPRoutes().Informer() },
		spec: func(r *gatewayv1.HTTPRoute) RouteSpec {
			return RouteSpec{ParentRefs: r.Spec.ParentRefs, Hostnames: r.Spec.Hostnames, BackendRefs: backendRefs(r.Spec.Rules,
				func(rule gatewayv1.HTTPRouteRule) []gatewayv1.HTTPBackendRef { return rule.BackendRefs },
				func(ref gatewayv1.HTTPBackendRef) gatewayv1.BackendObjectReference { return ref.BackendObjectReference })}
		},
		parents: func(r *gatewayv1.HTTPRoute) *[]gatewayv1.RouteParentStatus { return &r.Status.Parents },
		client: func(c gatewayclient.Interface, ns string) statusWriter[*gatewayv1.HTTPRoute] {
			return c.GatewayV1().HTTPRoutes(ns)
		},
	}.describe(),
	routeAccess[*gatewayv1.TCPRoute]{
		kind:     TCPRouteKind,
		informer: func(v1 gatewayinformers.Interface) cache.SharedIndexInformer { return v1.TCPRoutes().Informer() },
		spec: func(r *gatewayv1.TCPRoute) RouteSpec {
			return RouteSpec{ParentRefs: r.Spec.ParentRefs, BackendRefs: backendRefs(r.Spec.Rules,
				func(rule gatewayv1.TCPRouteRule) []gatewayv1.BackendRef { return rule.BackendRefs },
				func(ref gatewayv1.BackendRef) gatewayv1.BackendObjectReference { return ref.BackendObjectReference })}
		},
		parents: func(r *gatewayv1.TCPRoute) *[]gatewayv1.RouteParentStatus { return &r.Status.Parents },
		client: func(c gatewayclient.Interface, ns string) statusWriter[*gatewayv1.TCPRoute] {
			return c.GatewayV1().TCPRoutes(ns)
		},
	}.describe(),
	routeAccess[*gatewayv1.GRPCRoute]{
		kind:     GRPCRouteKind,
		informer: func(v1 gatewayinformers.Interface) cache.SharedIndexInformer { return v1.GRPCRoutes().Informer() },
		spec: func(r *gatewayv1.GRPCRoute) RouteSpec {
			return RouteSpec{ParentRefs: r.Spec.ParentRefs, Hostnames: r.Spec.Hostnames, BackendRefs: backendRefs(r.Spec.Rules,
				func(rule gatewayv1.GRPCRouteRule) []gatewayv1.GRPCBackendRef { return rule.BackendRefs },
				func(ref gatewayv1.GRPCBackendRef) gatewayv1.BackendObjectReference { return ref.BackendObjectReference })}
		},
		parents: func(r *gatewayv1.GRPCRoute) *[]gatewayv1.RouteParentStatus { return &r.Status.Parents },
		client: func(c gatewayclient.Interface, ns string) statusWriter[*gatewayv1.GRPCRoute] {
			return c.GatewayV1().GRPCRoutes(ns)
		},
	}.describe(),
	routeAccess[*gatewayv1.TLSRoute]{
		kind:     TLSRouteKind,
		informer: func(v1 gatewayinformers.Interface) cache.SharedIndexInformer { return v1.TLSRoutes().Informer() },
		spec: func(r *gatewayv1.TLSRoute) RouteSpec {
			return RouteSpec{ParentRefs: r.Spec.ParentRefs, Hostnames: r.Spec.Hostnames, BackendRefs: backendRefs(r.Spec.Rules,
				func(rule gatewayv1.TLSRouteRule) []gatewayv1.BackendRef { return rule.BackendRefs },
				func(ref gatewayv1.BackendRef) gatewayv1.BackendObjectReference { return ref.BackendObjectReference })}
		},
		parents: func(r *gatewayv1.TLSRoute) *[]gatewayv1.RouteParentStatus { return &r.Status.Parents },
		client: func(c gatewayclient.Interface, ns string) statusWriter[*gatewayv1.TLSRoute] {
			return c.GatewayV1().TLSRoutes(ns)
		},
	}.describe(),
	routeAccess[*gatewayv1.UDPRoute]{
		kind:     UDPRouteKind,
		informer: func(v1 gatewayinformers.Interface) cache.SharedIndexInformer { return v1.UDPRoutes().Informer() },
		spec: func(r *gatewayv1.UDPRoute) RouteSpec {
			return RouteSpec{ParentRefs: r.Spec.ParentRefs, BackendRefs: backendRefs(r.Spec.Rules,
				func(rule gatewayv1.UDPRouteRule) []gatewayv1.BackendRef { return rule.BackendRefs },
				func(ref gatewayv1.BackendRef) gatewayv1.BackendObjectReference { return ref.BackendObjectReference })}
		},
		parents: func(r *gatewayv1.UDPRoute) *[]gatewayv1.RouteParentStatus { return &r.Status.Parents },
		client: func(c gatewayclient.Interface, ns string) statusWriter[*gatewayv1.UDPRoute] {
			return c.GatewayV1().UDPRoutes(ns)
		},
	}.describe(),
}

// Route returns the description of a route kind; ok is false for any other kind.
func Route(kind gatewayv1.Kind) (RouteKind, bool) {
	for _, k := range Routes {
		if k.Kind == kind {
			return k, true
		}
	}
	return RouteKind{}, false
}

// RouteOf returns the description of obj's kind; ok is false when obj is no route.
func RouteOf(obj any) (RouteKind, bool) {
	for _, k := range Routes {
		if k.is(obj) {
			return k, true
		}
	}
	return RouteKind{}, false
}

// backendRefs reads the backendRefs of every rule, rule by rule; refs and object
// reach them through the kind's own rule and reference types.
func backendRefs[Rule, Ref any](rules []Rule, refs func(Rule) []Ref, object func(Ref) gatewayv1.BackendObjectReference) [][]gatewayv1.BackendObjectReference {
	out := make([][]gatewayv1.BackendObjectReference, len(rules))
	for i, rule := range rules {
		for _, ref := range refs(rule) {
			out[i] = append(out[i], object(ref))
		}
	}
	return out
}

// Object is what every Gateway API object is: a runtime.Object with metadata.
type Object interface {
	runtime.Object
	metav1.Object
}

// statusWriter is the part of a kind's typed client that writes status.
type statusWriter[R any] interface {
	UpdateStatus(ctx context.Context, route R, opts metav1.UpdateOptions) (R, error)
}

// routeAccess is a route kind written with its own types; describe erases them, so
// that every kind has the same description.
type routeAccess[R Object] struct {
	kind     gatewayv1.Kind
	informer func(gatewayinformers.Interface) cache.SharedIndexInformer
	spec     func(R) RouteSpec
	parents  func(R) *[]gatewayv1.RouteParentStatus
	client   func(c gatewayclient.Interface, namespace string) statusWriter[R]
}

func (a routeAccess[R]) describe() RouteKind {
	return RouteKind{
		Kind:     a.kind,
		Informer: a.informer,
		Spec: func(obj any) (RouteSpec, error) {
			r, ok := obj.(R)
			if !ok {
				return RouteSpec{}, fmt.Errorf("expected %s, got %T", a.kind, obj)
			}
			return a.spec(r), nil
		},
		Parents: func(obj runtime.Object) []gatewayv1.RouteParentStatus {
			r, ok := obj.(R)
			if !ok || reflect.ValueOf(r).IsNil() {
				return nil
			}
			return *a.parents(r)
		},
		UpdateParents: func(ctx context.Context, client gatewayclient.Interface, obj runtime.Object, parents []gatewayv1.RouteParentStatus) (runtime.Object, error) {
			r, ok := obj.(R)
			if !ok {
				return nil, fmt.Errorf("expected %s, got %T", a.kind, obj)
			}
			update := r.DeepCopyObject().(R)
			*a.parents(update) = parents
			return a.client(client, r.GetNamespace()).UpdateStatus(ctx, update, metav1.UpdateOptions{})
		},
		WithParents: func(obj runtime.Object, parents []gatewayv1.RouteParentStatus) (runtime.Object, error) {
			r, ok := obj.(R)
			if !ok {
				return nil, fmt.Errorf("expected %s, got %T", a.kind, obj)
			}
			update := r.DeepCopyObject().(R)
			*a.parents(update) = parents
			return update, nil
		},
		is: func(obj any) bool {
			_, ok := obj.(R)
			return ok
		},
	}
}

func objectMeta(obj any) (metav1.Object, error) {
	o, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("expected an object with metadata, got %T", obj)
	}
	return o, nil
}
