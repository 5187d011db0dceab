// Package decision holds what the status pipeline decided about a route beyond what
// its status spells out: where it is served, which rules were dropped and what
// each backendRef resolved to. It is data only, so that the Consul translation and the
// data plane can read a decision without depending on the status pipeline.
package decision

import (
	"slices"

	"k8s.io/apimachinery/pkg/types"
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
	// Backends are what each backendRef of each rule resolved to, in rule and
	// backendRef order, one for every backendRef. The translation writes what they say
	// and reads no Service: a change to a backend's Service or Consul service comes to
	// the syncer as a new decision.
	Backends []Backend
}

// Backend is what one backendRef of a route resolved to: the Consul service it sends
// traffic to, or, unresolved, nothing (its share of requests goes to the blackhole).
// The status pipeline checked it whole: its kind, ReferenceGrant, Service, port and
// appProtocol, and the Consul service its pods register.
type Backend struct {
	Ref BackendRefIndex
	// Resolved is false when the backendRef cannot receive traffic; the route's
	// ResolvedRefs condition says why. Only Ref and Referent are set then.
	Resolved bool
	// Referent is the Service or MeshService the backendRef names.
	Referent cache.ObjectName
	// Consul is the name of the Consul service it is, before the syncer's naming
	// places it: the Service's name, the name its pods register under (their
	// connect-service annotation), or a MeshService's spec.name.
	Consul string
	// Port is the Service port the backendRef names; 0 for a MeshService, as a
	// Consul service has no port.
	Port int32
	// MeshService is set when Referent is a MeshService: its Consul service is not
	// Kubernetes', and neither are its service-defaults.
	MeshService bool
	// Narrowed is set when pods of other Kubernetes namespaces (or instances outside
	// Kubernetes) register Consul too (Consul CE without namespace mirroring): the
	// traffic goes only to the instances of Referent's own namespace.
	Narrowed bool
	// ServiceUID is the UID of the Service, recorded as the owner of the entries
	// written for the backend (its service-defaults); "" for a MeshService.
	ServiceUID types.UID
}

// Renamed reports whether b's Consul service is not named after its referent.
func (b Backend) Renamed() bool { return b.Resolved && b.Consul != b.Referent.Name }

// Backend returns what backendRef ref resolved to; false when the decision does not
// hold it (the route has no such backendRef).
func (d Route) Backend(ref BackendRefIndex) (Backend, bool) {
	i := slices.IndexFunc(d.Backends, func(b Backend) bool { return b.Ref == ref })
	if i < 0 {
		return Backend{}, false
	}
	return d.Backends[i], true
}

// Unresolved lists the backendRefs that did not resolve, in rule and backendRef
// order.
func (d Route) Unresolved() []BackendRefIndex {
	var refs []BackendRefIndex
	for _, b := range d.Backends {
		if !b.Resolved {
			refs = append(refs, b.Ref)
		}
	}
	return refs
}

// Equal reports whether d and o decide the same: the same dropped rules, backends and
// attachments, in the same order.
func (d Route) Equal(o Route) bool {
	return slices.Equal(d.DroppedRules, o.DroppedRules) &&
		slices.Equal(d.Backends, o.Backends) &&
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
