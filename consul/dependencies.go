package consul

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/workqueue"
)

// Write and delete order. Consul judges an entry when it is written, against what
// exists then, and refuses some writes and deletes outright (measured on Consul 1.15.4,
// test/integration TestNarrowedBackends):
//
//   - An http-route written before its backends' service-defaults is judged
//     InvalidDiscoveryChain, an api-gateway written before its inline-certificates
//     InvalidCertificates; each is judged again only later, if ever.
//   - A service-resolver that redirects to a subset of another service is refused
//     until that service's own resolver defines the subset (`service "echo" does not
//     have a subset named "demo"`).
//   - A redirect puts two services in one discovery chain, whose protocols must agree
//     (agent/consul/discoverychain/compile.go, recordProtocol): a redirecting resolver
//     written while its own name has no service-defaults (tcp) and the target's are
//     http is refused (`uses inconsistent protocols`). So a name's service-defaults
//     are written before its redirecting resolver, never after; when the protocols
//     cannot agree, the resolver's write is the one refused, and says why.
//
// Deletes run the other way: Consul refuses to delete the target's resolver (or to
// drop the subset from it), and to delete either name's service-defaults, while the
// redirect exists. The ledger keeps what each entry of ours Consul holds refers to
// (entryLine.refersTo), and each entry is held back until nothing refers to it.

// dependencies are the entries entry refers to that must exist before it is written,
// when the syncer writes them too:
//   - an http-route or tcp-route: the service-defaults and the service-resolver of each
//     service it names;
//   - an api-gateway: its inline-certificates;
//   - a service-resolver with a redirect: its own name's service-defaults, and the
//     redirect target's service-defaults and service-resolver.
func dependencies(entry consulapi.ConfigEntry) []translate.EntryKey {
	var deps []translate.EntryKey
	switch e := entry.(type) {
	case *consulapi.HTTPRouteConfigEntry, *consulapi.TCPRouteConfigEntry:
		for _, svc := range routeServices(e) {
			deps = append(deps, serviceEntries(svc.Name, svc.Namespace, svc.Partition)...)
		}
	case *consulapi.APIGatewayConfigEntry:
		for _, l := range e.Listeners {
			for _, cert := range l.TLS.Certificates {
				if cert.Kind == consulapi.InlineCertificate {
					deps = append(deps, translate.EntryKey{Kind: cert.Kind, Name: cert.Name, Namespace: cert.Namespace, Partition: cert.Partition})
				}
			}
		}
	case *consulapi.ServiceResolverConfigEntry:
		if e.Redirect == nil || e.Redirect.Service == "" {
			return nil
		}
		deps = append(deps, translate.EntryKey{Kind: consulapi.ServiceDefaults, Name: e.Name, Namespace: e.Namespace, Partition: e.Partition})
		deps = append(deps, serviceEntries(e.Redirect.Service, cmp.Or(e.Redirect.Namespace, e.Namespace), cmp.Or(e.Redirect.Partition, e.Partition))...)
	}
	return deps
}

// serviceEntries are the keys of a service's service-defaults and service-resolver.
func serviceEntries(name, namespace, partition string) []translate.EntryKey {
	return []translate.EntryKey{
		{Kind: consulapi.ServiceDefaults, Name: name, Namespace: namespace, Partition: partition},
		{Kind: consulapi.ServiceResolver, Name: name, Namespace: namespace, Partition: partition},
	}
}

// orderedReferences are the references of entry, an entry of ours Consul holds, whose
// target may be deleted only after entry stops naming it: everything a redirecting
// resolver needs (Consul refuses the delete), and a route's service-resolvers (the
// route would lose its narrowing, or reach no instance) where one exists or is
// desired; most routes name services without one, and at thousands of routes nothing
// is kept for them. A route's service-defaults are not ordered: they outlive it by
// ServiceDefaultsGrace anyway. Callers hold l.mu.
func (l *ledger) orderedReferences(entry consulapi.ConfigEntry) []translate.EntryKey {
	if entry.GetKind() == consulapi.ServiceResolver {
		return dependencies(entry)
	}
	var refs []translate.EntryKey
	for _, svc := range routeServices(entry) {
		k := translate.EntryKey{Kind: consulapi.ServiceResolver, Name: svc.Name, Namespace: svc.Namespace, Partition: svc.Partition}
		if e := l.entries[k]; e != nil && (e.desired != nil || e.present) {
			refs = append(refs, k)
		}
	}
	return refs
}

// routeServices are the Consul services a route entry sends traffic to.
func routeServices(entry consulapi.ConfigEntry) []consulapi.ResourceReference {
	var out []consulapi.ResourceReference
	switch e := entry.(type) {
	case *consulapi.HTTPRouteConfigEntry:
		for _, rule := range e.Rules {
			for _, svc := range rule.Services {
				out = append(out, consulapi.ResourceReference{Name: svc.Name, Namespace: svc.Namespace, Partition: svc.Partition})
			}
		}
	case *consulapi.TCPRouteConfigEntry:
		for _, svc := range e.Services {
			out = append(out, consulapi.ResourceReference{Name: svc.Name, Namespace: svc.Namespace, Partition: svc.Partition})
		}
	}
	return out
}

// isRoute reports whether kind is a route entry kind.
func isRoute(kind string) bool { return kind == consulapi.HTTPRoute || kind == consulapi.TCPRoute }

// dependenciesWritten holds the entry under key back until the entries it depends on
// (dependencies), where desired, exist: it asks for them to be written first. When
// one cannot be written, because Consul refused it or an entry of someone else stands
// in its place, the result says why (blocked): the owner of key is told, and its entry
// is not written until that is resolved.
func (s *Syncer) dependenciesWritten(ctx context.Context, key translate.EntryKey, desired consulapi.ConfigEntry) result {
	for _, dep := range dependencies(desired) {
		known := s.ledger.dependency(dep)
		if known.desired == nil {
			continue
		}
		// A service-defaults or inline-certificate that someone else wrote serves as
		// well as ours; a route's service-resolver must be ours (see below), so its
		// owner is read.
		if known.held || dep.Kind != consulapi.ServiceResolver && known.present {
			continue
		}
		actual, err := s.readEntry(ctx, dep)
		if err != nil {
			return result{err: err}
		}
		switch {
		case actual == nil:
			return s.waitFor(key, dep, known)
		case isRoute(key.Kind) && dep.Kind == consulapi.ServiceResolver && !s.cfg.Ownership.Owns(actual.GetMeta()):
			// The resolver under a name of ours narrows the route to its namespace's
			// instances; one written by someone else may send the traffic anywhere.
			return result{queue: []translate.EntryKey{dep}, blocked: fmt.Sprintf("%s %s, which exists in Consul and is not this controller's: it is left alone; remove it so that this controller can write its own",
				dep.Kind, dep.Name)}
		}
	}
	return result{}
}

// waitFor is the result of an entry that waits for dep to be written, which is queued.
// When dep cannot be written, because Consul refused it or it waits in turn for an
// entry that cannot be, it says why, with what stands in the way.
func (s *Syncer) waitFor(key, dep translate.EntryKey, known dependencyState) result {
	res := result{queue: []translate.EntryKey{dep}}
	switch {
	case known.refused != "":
		res.blocked = fmt.Sprintf("%s %s, which Consul refused: %s", dep.Kind, dep.Name, known.refused)
		for _, note := range s.notOursNotes(known.desired) {
			res.blocked += "; " + note
		}
	case known.heldBack != "":
		res.blocked = fmt.Sprintf("%s %s, which waits for %s", dep.Kind, dep.Name, known.heldBack)
	default:
		res.err = workqueue.Expected(fmt.Errorf("%s %s waits for %s %s to be written first", key.Kind, key.Name, dep.Kind, dep.Name))
	}
	return res
}

// notOursNotes say, for each entry desired depends on that Consul holds and that is
// not this controller's, what its owner can do.
func (s *Syncer) notOursNotes(desired consulapi.ConfigEntry) []string {
	var notes []string
	for _, dep := range dependencies(desired) {
		known := s.ledger.dependency(dep)
		if known.desired == nil || !known.foreign {
			continue
		}
		notes = append(notes, fmt.Sprintf("Consul's %s of %s is not this controller's: %s", dep.Kind, dep.Name, remedy(desired, known.desired)))
	}
	return notes
}

// remedy says what the owner of an entry that is not ours can change in it so that
// referrer works: the subset referrer redirects to, or the protocol it needs.
func remedy(referrer, wanted consulapi.ConfigEntry) string {
	switch w := wanted.(type) {
	case *consulapi.ServiceResolverConfigEntry:
		r, ok := referrer.(*consulapi.ServiceResolverConfigEntry)
		if !ok || r.Redirect == nil || r.Redirect.ServiceSubset == "" {
			break
		}
		subset, ok := w.Subsets[r.Redirect.ServiceSubset]
		if !ok {
			break
		}
		return fmt.Sprintf("add the subset %s with filter %s to it, or remove it", r.Redirect.ServiceSubset, subset.Filter)
	case *consulapi.ServiceConfigEntry:
		if w.Protocol != "" {
			return fmt.Sprintf("give it the protocol %s, or remove it", w.Protocol)
		}
	}
	return "it is left alone"
}

// compareKeys orders entry keys by kind, partition, namespace and name.
func compareKeys(a, b translate.EntryKey) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// orderingReferences are the references of kind's entries of ours in a watch answer that
// order deletes (orderedReferences); nil for kinds that refer to nothing ordered.
func (s *Syncer) orderingReferences(kind string, entries []consulapi.ConfigEntry) map[translate.EntryKey][]translate.EntryKey {
	if !isRoute(kind) && kind != consulapi.ServiceResolver {
		return nil
	}
	refs := map[translate.EntryKey][]translate.EntryKey{}
	for _, entry := range entries {
		if !s.cfg.Ownership.Owns(entry.GetMeta()) {
			continue
		}
		if to := s.ledger.referencesOf(entry); len(to) > 0 {
			refs[translate.KeyOf(entry)] = to
		}
	}
	return refs
}

// leavingReferrers are the entries of ours Consul holds that refer to key and are to
// stop referring to it: deleted, or changed to name something else. One desired to go
// on naming key is left out: waiting for it would hold key back for good, and nothing
// Consul refuses is in that case (a route that goes on naming a service whose
// resolver of ours is no longer desired).
func (s *Syncer) leavingReferrers(key translate.EntryKey) []translate.EntryKey {
	return slices.DeleteFunc(s.ledger.referrers(key), func(referrer translate.EntryKey) bool {
		desired, ok := s.desiredEntry(referrer)
		return ok && slices.Contains(dependencies(desired), key)
	})
}

// referredError is the error of a delete that waits for the entries of ours that are
// to stop referring to key (leavingReferrers).
func referredError(key translate.EntryKey, by []translate.EntryKey) error {
	names := make([]string, len(by))
	for i, k := range by {
		names[i] = k.Kind + " " + k.Name
	}
	return workqueue.Expected(fmt.Errorf("%s %s is deleted once nothing of ours refers to it; %s still does", key.Kind, key.Name, strings.Join(names, ", ")))
}

// writeRank places a kind in the order a translation's changed entries are queued:
// what other entries refer to first, routes last. dependencies holds a write back
// until what it names exists; this order makes that rare, and also covers the one
// reference that is not a dependency: a route's parent api-gateway. A route written
// before its gateway is judged bound to nothing and judged again when the gateway
// comes, work for the one Consul goroutine that judges. At a cold start of 10,000
// routes (make bench), 5,207 routes were written before their api-gateway when the
// queue took the changed keys in the translation's map order.
var writeRank = map[string]int{
	consulapi.InlineCertificate: 0,
	consulapi.ServiceDefaults:   1,
	consulapi.ServiceResolver:   2,
	consulapi.APIGateway:        3,
	consulapi.HTTPRoute:         4,
	consulapi.TCPRoute:          4,
}

// inWriteOrder sorts keys by writeRank (other kinds between resolvers and gateways),
// then by name, so the order is the same every time.
func inWriteOrder(keys []translate.EntryKey) {
	rank := func(k translate.EntryKey) int {
		if r, ok := writeRank[k.Kind]; ok {
			return r
		}
		return 2
	}
	slices.SortFunc(keys, func(a, b translate.EntryKey) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(a.Kind, b.Kind),
			cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
}
