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
	// RenamedBackends are the resolved backendRefs whose Consul service is not named
	// after their Service: consul-k8s registers the Service's pods under the name of
	// their connect-service annotation. In rule and backendRef order.
	RenamedBackends []RenamedBackend
	// NarrowedBackends are the resolved backendRefs whose Consul service pods of other
	// Kubernetes namespaces register too (Consul CE without namespace mirroring): their
	// traffic goes only to the instances of the referent's own namespace. In rule and
	// backendRef order.
	NarrowedBackends []BackendRefIndex
}

// RenamedBackend is a backendRef and the Consul service its Service's pods register
// under.
type RenamedBackend struct {
	Ref BackendRefIndex
	// Service is the Consul service name, before any prefix or namespace placement.
	Service string
}

// ConsulService is the Consul service backendRef ref, to a Service named service,
// sends traffic to: the name its pods register under, or the Service's own.
func (d Route) ConsulService(ref BackendRefIndex, service string) string {
	for _, r := range d.RenamedBackends {
		if r.Ref == ref {
			return r.Service
		}
	}
	return service
}

// Narrowed reports whether backendRef ref reaches only its own namespace's instances
// of its Consul service.
func (d Route) Narrowed(ref BackendRefIndex) bool {
	return slices.Contains(d.NarrowedBackends, ref)
}

// Equal reports whether d and o decide the same: the same dropped rules, unresolved,
// renamed and narrowed backendRefs and attachments, in the same order.
func (d Route) Equal(o Route) bool {
	return slices.Equal(d.DroppedRules, o.DroppedRules) &&
		slices.Equal(d.UnresolvedBackends, o.UnresolvedBackends) &&
		slices.Equal(d.RenamedBackends, o.RenamedBackends) &&
		slices.Equal(d.NarrowedBackends, o.NarrowedBackends) &&
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
