package sync

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// This file is the contract between the status pipeline and its consumers (the Consul
// syncer, the data plane, the catalog registrar): what they are handed, and when.

// Confirmation is an object whose status the API server holds exactly as this
// controller computed it: the object a status write returned, or a cached object whose
// stored status already equals the computed one. Object is nil when the object was
// deleted, is no longer ours, or must not be served (a Gateway asking for TLS Consul
// cannot honour; its status says why); whatever was derived from it must go.
type Confirmation struct {
	Kind   gatewayv1.Kind
	Key    cache.ObjectName
	Object runtime.Object
	// Route is set for routes with an Object: the decision made together with the
	// confirmed status, which the status itself does not spell out.
	Route *RouteDecision
}

// RouteDecision is what a route's status implies for the data plane.
type RouteDecision struct {
	// Attachments are the listeners of each Gateway the route is accepted on and
	// served by, in parentRef order.
	Attachments []Attachment
	// DroppedRules are the indexes of the rules that cannot be programmed (reported
	// as PartiallyInvalid or, when all are, not Accepted).
	DroppedRules []int
	// UnresolvedBackends are the backendRefs that did not resolve, each of them (the
	// ResolvedRefs condition names only the first). Every other backendRef resolved:
	// its kind, port and, in another namespace, its ReferenceGrant were checked.
	UnresolvedBackends []BackendRefIndex
}

// Equal reports whether d and o decide the same: the same dropped rules, unresolved
// backendRefs and attachments, in the same order.
func (d RouteDecision) Equal(o RouteDecision) bool {
	return slices.Equal(d.DroppedRules, o.DroppedRules) &&
		slices.Equal(d.UnresolvedBackends, o.UnresolvedBackends) &&
		slices.EqualFunc(d.Attachments, o.Attachments, func(x, y Attachment) bool {
			return x.Gateway == y.Gateway && slices.Equal(x.Listeners, y.Listeners)
		})
}

// BackendRefIndex identifies a backendRef of a route: its rule's index and its own
// index in that rule.
type BackendRefIndex struct {
	Rule, Ref int
}

// Attachment is a Gateway and the listeners of it that serve a route.
type Attachment struct {
	Gateway   cache.ObjectName
	Listeners []gatewayv1.SectionName
}

// Publisher receives confirmations. For one key they arrive in the order the API server
// confirmed them, because one key is synced by one worker at a time.
type Publisher interface {
	Publish(ctx context.Context, c Confirmation)
}

// Publishers hands each confirmation to every one of its Publishers, in order.
type Publishers []Publisher

// Publish implements Publisher.
func (ps Publishers) Publish(ctx context.Context, c Confirmation) {
	for _, p := range ps {
		p.Publish(ctx, c)
	}
}
