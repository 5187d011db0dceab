package translate

import (
	"reflect"

	consulapi "github.com/hashicorp/consul/api"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	gwdecision "github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

// objectTranslation is what one unit's translation produced, and what it read.
type objectTranslation struct {
	source   any // the confirmed object; a backend or blackhole for their units
	decision *gwdecision.Route
	reads    []read

	entries  []consulapi.ConfigEntry
	problems []Problem
	// gateway is the api-gateway as routes see it; nil when none was written.
	gateway *programmedGateway
	// backends are the Services an http-route sends traffic to, httpServices the
	// Consul services they are.
	backends     []backend
	httpServices []consulService
	// blackholes are the blackhole services the routes send refused requests to.
	blackholes []consulService
	// subsets are the subsets a narrowed backend's service-resolver redirects to.
	subsets []subsetUse
}

// readKind names what a translation looked up.
type readKind int

const (
	readSecret       readKind = iota // key cache.ObjectName: *corev1.Secret
	readGateway                      // key cache.ObjectName: *programmedGateway
	readHTTPService                  // key consulService: bool
	readListenerSets                 // key cache.ObjectName (a Gateway): listenerSetsVersion
)

// read is one lookup and what it found; found values compare with ==.
type read struct {
	kind  readKind
	key   any
	found any
}

// translateObject runs translate, recording what it produces and reads.
func (t *pass) translateObject(source any, decision *gwdecision.Route, translate func()) *objectTranslation {
	t.out = &objectTranslation{source: source}
	if decision != nil {
		d := *decision
		t.out.decision = &d
	}
	translate()
	out := t.out
	t.out = nil
	return out
}

// keepEqual puts prev's entries in place of out's equal ones: a new version of an
// object often translates to the same entries (its status changed, not what Consul is
// told), and an entry that keeps its identity is known unchanged without a deep
// comparison by whoever holds it (the syncer, the drift watch). The same goes for the
// api-gateway as routes see it: routes read it by identity.
func keepEqual(out, prev *objectTranslation) {
	for i, e := range out.entries {
		for _, p := range prev.entries {
			if KeyOf(p) == KeyOf(e) && reflect.DeepEqual(p, e) {
				out.entries[i] = p
				break
			}
		}
	}
	if out.gateway != nil && prev.gateway != nil && reflect.DeepEqual(*out.gateway, *prev.gateway) {
		out.gateway = prev.gateway
	}
}

// stillHolds reports whether prev is the translation of source and decision given what
// the snapshot holds now.
func (t *pass) stillHolds(prev *objectTranslation, source any, decision *gwdecision.Route) bool {
	if prev.source != source && !sameStoredVersion(prev.source, source) {
		return false
	}
	if (decision == nil) != (prev.decision == nil) || (decision != nil && !decision.Equal(*prev.decision)) {
		return false
	}
	for _, r := range prev.reads {
		if t.lookup(r.kind, r.key) != r.found {
			return false
		}
	}
	return true
}

// sameStoredVersion reports whether a and b are one version of one stored object in
// two allocations: the object a status write returned and the cache's copy of it. The
// syncer holds the latter once it comes, so the former can be freed. Versions are
// compared for equality only.
func sameStoredVersion(a, b any) bool {
	ma, okA := a.(metav1.Object)
	mb, okB := b.(metav1.Object)
	return okA && okB && ma.GetUID() != "" && ma.GetUID() == mb.GetUID() &&
		ma.GetResourceVersion() != "" && ma.GetResourceVersion() == mb.GetResourceVersion()
}

// read looks key up and, while an object is being translated, records what it found.
func (t *pass) read(kind readKind, key any) any {
	found := t.lookup(kind, key)
	if t.out != nil {
		t.out.reads = append(t.out.reads, read{kind: kind, key: key, found: found})
	}
	return found
}

func (t *pass) lookup(kind readKind, key any) any {
	switch kind {
	case readSecret:
		return t.snap.Secrets[key.(cache.ObjectName)]
	case readGateway:
		return t.gateways[key.(cache.ObjectName)]
	case readHTTPService:
		return t.httpServices[key.(consulService)] > 0
	case readListenerSets:
		return listenerSetsVersion(t.listenerSets[key.(cache.ObjectName)])
	}
	return nil
}
