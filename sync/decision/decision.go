// Package decision holds what the status pipeline decided about a route beyond what
// its status spells out: where it is served, which rules were dropped and which
// backendRefs did not resolve. It is data only, so that the Consul translation and the
// data plane can read a decision without depending on the status pipeline.
package decision

import (
	"slices"

	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Route is what a route's status implies for the data plane.
type Route struct {
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
func (d Route) Equal(o Route) bool {
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
