package consul

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	gosync "sync"

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
// redirect exists. consulReferences holds each entry back until nothing of ours that
// Consul holds refers to it.

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
// ServiceDefaultsGrace anyway.
func (s *Syncer) orderedReferences(entry consulapi.ConfigEntry) []translate.EntryKey {
	if entry.GetKind() == consulapi.ServiceResolver {
		return dependencies(entry)
	}
	var refs []translate.EntryKey
	for _, svc := range routeServices(entry) {
		k := translate.EntryKey{Kind: consulapi.ServiceResolver, Name: svc.Name, Namespace: svc.Namespace, Partition: svc.Partition}
		if _, desired := s.desiredEntry(k); desired || s.view.exists(k) {
			refs = append(refs, k)
		}
	}
	return refs
}

// isRoute reports whether kind is a route entry kind.
func isRoute(kind string) bool { return kind == consulapi.HTTPRoute || kind == consulapi.TCPRoute }

// dependenciesWritten holds the entry under key back until the entries it depends on
// (dependencies), where desired, exist. When one cannot be written, because Consul
// refused it or an entry of someone else stands in its place, the owner of key is told
// why: its entry is not written until that is resolved.
func (s *Syncer) dependenciesWritten(ctx context.Context, key translate.EntryKey, desired consulapi.ConfigEntry) error {
	for _, dep := range dependencies(desired) {
		wanted, ok := s.desiredEntry(dep)
		if !ok || s.held.held(dep, wanted) {
			continue
		}
		// A service-defaults or inline-certificate that someone else wrote serves as
		// well as ours; a route's service-resolver must be ours (see below), so its
		// owner is read.
		if dep.Kind != consulapi.ServiceResolver && s.view.exists(dep) {
			continue
		}
		actual, err := s.readEntry(ctx, dep)
		if err != nil {
			return err
		}
		switch {
		case actual == nil:
			s.queue.Add(dep)
			return s.waitFor(key, desired, dep, wanted)
		case isRoute(key.Kind) && dep.Kind == consulapi.ServiceResolver && !s.cfg.Ownership.Owns(actual.GetMeta()):
			// The resolver under a name of ours narrows the route to its namespace's
			// instances; one written by someone else may send the traffic anywhere.
			s.queue.Add(dep)
			return s.blocked(key, desired, fmt.Sprintf("%s %s, which exists in Consul and is not this controller's: it is left alone; remove it so that this controller can write its own",
				dep.Kind, dep.Name))
		}
	}
	return nil
}

// waitFor is the error of an entry that waits for dep to be written. When dep cannot
// be written, because Consul refused it or it waits in turn for an entry that cannot
// be, the entry's owner is told why, with what stands in the way.
func (s *Syncer) waitFor(key translate.EntryKey, desired consulapi.ConfigEntry, dep translate.EntryKey, depDesired consulapi.ConfigEntry) error {
	if why := s.verdicts.refusal(dep); why != "" {
		reason := fmt.Sprintf("%s %s, which Consul refused: %s", dep.Kind, dep.Name, why)
		for _, note := range s.notOursNotes(depDesired) {
			reason += "; " + note
		}
		return s.blocked(key, desired, reason)
	}
	if held := s.verdicts.heldBackBy(dep); held != "" {
		return s.blocked(key, desired, fmt.Sprintf("%s %s, which waits for %s", dep.Kind, dep.Name, held))
	}
	return workqueue.Expected(fmt.Errorf("%s %s waits for %s %s to be written first", key.Kind, key.Name, dep.Kind, dep.Name))
}

// blocked records that the entry under key waits for what reason names and cannot be
// written: on its owner's verdict, and for the entries that wait for it in turn (a
// route for the redirect that waits for a resolver Consul refused). It returns that
// as the expected error of a key that is tried again later.
func (s *Syncer) blocked(key translate.EntryKey, desired consulapi.ConfigEntry, reason string) error {
	msg := fmt.Sprintf("%s %s waits for %s", key.Kind, key.Name, reason)
	s.verdicts.holdBack(key, reason)
	s.verdicts.waits(key, desired.GetMeta(), msg, s.statusChanged)
	return workqueue.Expected(errors.New(msg))
}

// notOursNotes say, for each entry desired depends on that Consul holds and that is
// not this controller's, what its owner can do.
func (s *Syncer) notOursNotes(desired consulapi.ConfigEntry) []string {
	var notes []string
	for _, dep := range dependencies(desired) {
		wanted, ok := s.desiredEntry(dep)
		if !ok || !s.verdicts.notOurs(dep) {
			continue
		}
		notes = append(notes, fmt.Sprintf("Consul's %s of %s is not this controller's: %s", dep.Kind, dep.Name, remedy(desired, wanted)))
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

// consulReferences are, for the entries of ours Consul holds (as the watch last listed
// them, and as the syncer wrote and deleted them since), the entries each refers to
// that may be deleted only after it (deleteOrdered). Only those references are kept:
// at thousands of routes, a route's service-defaults would cost memory for no order.
type consulReferences struct {
	mu gosync.Mutex
	// from is what each entry refers to, to what is referred to by whom.
	from map[translate.EntryKey][]translate.EntryKey
	to   map[translate.EntryKey]map[translate.EntryKey]bool
}

func newConsulReferences() *consulReferences {
	return &consulReferences{from: map[translate.EntryKey][]translate.EntryKey{}, to: map[translate.EntryKey]map[translate.EntryKey]bool{}}
}

// list records that the entries of ours of kind Consul holds are exactly the keys of
// refs, each referring to its value, and returns the entries nothing refers to any
// more.
func (r *consulReferences) list(kind string, refs map[translate.EntryKey][]translate.EntryKey) []translate.EntryKey {
	r.mu.Lock()
	defer r.mu.Unlock()
	var released []translate.EntryKey
	for from := range r.from {
		if from.Kind == kind {
			released = append(released, r.setLocked(from, nil)...)
		}
	}
	for from, to := range refs {
		r.setLocked(from, to)
	}
	return slices.DeleteFunc(released, func(k translate.EntryKey) bool { return len(r.to[k]) > 0 })
}

// wrote records that Consul holds an entry under key that refers to refs, and returns
// the entries nothing refers to any more.
func (r *consulReferences) wrote(key translate.EntryKey, refs []translate.EntryKey) []translate.EntryKey {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.setLocked(key, refs)
}

// deleted records that Consul holds nothing under key, and returns the entries nothing
// refers to any more.
func (r *consulReferences) deleted(key translate.EntryKey) []translate.EntryKey {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.setLocked(key, nil)
}

// setLocked replaces what from refers to, and returns what nothing refers to any more.
// Callers hold r.mu.
func (r *consulReferences) setLocked(from translate.EntryKey, to []translate.EntryKey) []translate.EntryKey {
	var released []translate.EntryKey
	for _, old := range r.from[from] {
		delete(r.to[old], from)
		if len(r.to[old]) == 0 {
			delete(r.to, old)
			released = append(released, old)
		}
	}
	delete(r.from, from)
	if len(to) == 0 {
		return released
	}
	r.from[from] = to
	for _, k := range to {
		if r.to[k] == nil {
			r.to[k] = map[translate.EntryKey]bool{}
		}
		r.to[k][from] = true
	}
	return slices.DeleteFunc(released, func(k translate.EntryKey) bool { return len(r.to[k]) > 0 })
}

// referrers are the entries of ours Consul holds that refer to key, sorted.
func (r *consulReferences) referrers(key translate.EntryKey) []translate.EntryKey {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []translate.EntryKey
	for k := range r.to[key] {
		out = append(out, k)
	}
	slices.SortFunc(out, compareKeys)
	return out
}

// compareKeys orders entry keys by kind, partition, namespace and name.
func compareKeys(a, b translate.EntryKey) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// noteReferences records the references of kind's entries of ours in a watch answer,
// and queues what nothing refers to any more.
func (s *Syncer) noteReferences(kind string, entries []consulapi.ConfigEntry) {
	if !isRoute(kind) && kind != consulapi.ServiceResolver {
		return
	}
	refs := map[translate.EntryKey][]translate.EntryKey{}
	for _, entry := range entries {
		if !s.cfg.Ownership.Owns(entry.GetMeta()) {
			continue
		}
		if to := s.orderedReferences(entry); len(to) > 0 {
			refs[translate.KeyOf(entry)] = to
		}
	}
	s.queueAll(s.refs.list(kind, refs))
}

// queueAll queues keys: entries whose delete (or change) waited for a referrer that
// went.
func (s *Syncer) queueAll(keys []translate.EntryKey) {
	for _, k := range keys {
		s.queue.Add(k)
	}
}

// leavingReferrers are the entries of ours Consul holds that refer to key and are to
// stop referring to it: deleted, or changed to name something else. One desired to go
// on naming key is left out: waiting for it would hold key back for good, and nothing
// Consul refuses is in that case (a route that goes on naming a service whose
// resolver of ours is no longer desired).
func (s *Syncer) leavingReferrers(key translate.EntryKey) []translate.EntryKey {
	return slices.DeleteFunc(s.refs.referrers(key), func(referrer translate.EntryKey) bool {
		desired, ok := s.desiredEntry(referrer)
		return ok && slices.Contains(dependencies(desired), key)
	})
}

// stillReferred is the error of a delete that waits for the entries of ours that are
// to stop referring to key (leavingReferrers), nil when there is none.
func (s *Syncer) stillReferred(key translate.EntryKey) error {
	by := s.leavingReferrers(key)
	if len(by) == 0 {
		return nil
	}
	names := make([]string, len(by))
	for i, k := range by {
		names[i] = k.Kind + " " + k.Name
	}
	return workqueue.Expected(fmt.Errorf("%s %s is deleted once nothing of ours refers to it; %s still does", key.Kind, key.Name, strings.Join(names, ", ")))
}
