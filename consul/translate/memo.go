package translate

import (
	"reflect"

	consulapi "github.com/hashicorp/consul/api"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	gwdecision "github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

// Translator is Translate with a memory: it keeps each object's translation together
// with everything that translation read, and hands it back unchanged while the object
// is the same confirmed object and every read finds what it found before. A change
// costs the translation of the objects it touches, not of the world; the rest is a
// walk over the snapshot that compares pointers.
//
// Confirmed objects and cached Secrets and Services are never modified in place (a
// new version is a new object), so "the same object" is pointer identity; no
// resourceVersion is involved.
type Translator struct {
	naming Naming
	owner  Ownership
	opts   Options
	memo   translations
	// order holds the keys of the last snapshot, sorted, per kind.
	order keyOrder
	// entries is how many entries the last translation produced, to size the next.
	entries int
	// translated counts the objects translated anew by the last Translate.
	translated int
}

// keyOrder is the sorted keys of each kind of object in the last snapshot. Most
// snapshots hold the same objects as the one before (new versions of them), and
// sorting thousands of keys each time would cost more than translating a change.
type keyOrder struct {
	gateways []cache.ObjectName
	routes   map[gatewayv1.Kind][]cache.ObjectName
}

// sortedKeysLike returns m's keys sorted, reusing last when it holds exactly them.
func sortedKeysLike[V any](last []cache.ObjectName, m map[cache.ObjectName]V) []cache.ObjectName {
	if len(last) == len(m) {
		same := true
		for _, k := range last {
			if _, ok := m[k]; !ok {
				same = false
				break
			}
		}
		if same {
			return last
		}
	}
	return sortedKeys(m)
}

// translations are the kept translations by object.
type translations struct {
	gateways map[cache.ObjectName]*objectTranslation
	routes   map[gatewayv1.Kind]map[cache.ObjectName]*objectTranslation
}

// NewTranslator returns a Translator for one syncer's naming, ownership and options.
// Translated is how many objects the last Translate translated anew.
func (tr *Translator) Translated() int { return tr.translated }

func NewTranslator(n Naming, o Ownership, opts Options) *Translator {
	return &Translator{naming: n, owner: o, opts: opts}
}

// Translate computes what Translate computes for s, reusing the kept translations of
// the objects nothing changed for.
func (tr *Translator) Translate(s Snapshot) Desired {
	t := newPass(s, tr.naming, tr.owner, tr.opts)
	t.desired.Entries = make(map[EntryKey]consulapi.ConfigEntry, tr.entries)
	next := translations{
		gateways: make(map[cache.ObjectName]*objectTranslation, len(s.Gateways)),
		routes:   make(map[gatewayv1.Kind]map[cache.ObjectName]*objectTranslation, len(routeTranslations)),
	}
	order := keyOrder{
		gateways: sortedKeysLike(tr.order.gateways, s.Gateways),
		routes:   make(map[gatewayv1.Kind][]cache.ObjectName, len(routeTranslations)),
	}
	for _, rt := range routeTranslations {
		next.routes[rt.kind] = make(map[cache.ObjectName]*objectTranslation, len(s.Routes[rt.kind]))
		order.routes[rt.kind] = sortedKeysLike(tr.order.routes[rt.kind], s.Routes[rt.kind])
	}
	tr.order = order
	// Gateways first: routes bind only to the listeners that were written.
	for _, key := range tr.order.gateways {
		gw := s.Gateways[key]
		next.gateways[key] = t.object(tr.memo.gateways[key], gw, nil, func() { t.gateway(key, gw) })
		if pg := next.gateways[key].gateway; pg != nil {
			t.gateways[key] = pg
		}
	}
	for _, rt := range routeTranslations {
		for _, key := range tr.order.routes[rt.kind] {
			c := s.Routes[rt.kind][key]
			next.routes[rt.kind][key] = t.object(tr.memo.routes[rt.kind][key], c.Route, &c.Decision, func() { rt.translate(t, key, c) })
		}
	}
	tr.memo = next
	tr.translated = t.translated
	desired := t.finish()
	tr.entries = len(desired.Entries)
	return desired
}

// objectTranslation is what one object's translation produced, and what it read.
type objectTranslation struct {
	source   any // the confirmed object
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
}

// readKind names what a translation looked up.
type readKind int

const (
	readSecret       readKind = iota // key cache.ObjectName: *corev1.Secret
	readService                      // key cache.ObjectName: *corev1.Service
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

// object reuses prev when it still holds for source and decision, and otherwise runs
// translate, recording what it produces and reads. Either way, the result is added to
// the translation in progress.
func (t *pass) object(prev *objectTranslation, source any, decision *gwdecision.Route, translate func()) *objectTranslation {
	if prev != nil && t.stillHolds(prev, source, decision) {
		prev.source = source // the newest allocation of the version: the other can go
		t.apply(prev)
		return prev
	}
	t.out = &objectTranslation{source: source}
	if decision != nil {
		d := *decision
		t.out.decision = &d
	}
	translate()
	out := t.out
	t.out = nil
	t.translated++
	if prev != nil {
		keepEqualEntries(out, prev)
	}
	t.apply(out)
	return out
}

// keepEqualEntries puts prev's entries in place of out's equal ones: a new version
// of an object often translates to the same entries (its status changed, not what
// Consul is told), and an entry that keeps its identity is known unchanged without a
// deep comparison by whoever holds it (the syncer, the drift watch).
func keepEqualEntries(out, prev *objectTranslation) {
	for i, e := range out.entries {
		for _, p := range prev.entries {
			if KeyOf(p) == KeyOf(e) && reflect.DeepEqual(p, e) {
				out.entries[i] = p
				break
			}
		}
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
	case readService:
		return t.snap.Services[key.(cache.ObjectName)]
	case readGateway:
		return t.gateways[key.(cache.ObjectName)]
	case readHTTPService:
		return t.httpServices[key.(consulService)]
	case readListenerSets:
		return listenerSetsVersion(t.listenerSets[key.(cache.ObjectName)])
	}
	return nil
}

// apply adds an object's translation to the one in progress.
func (t *pass) apply(o *objectTranslation) {
	for _, e := range o.entries {
		t.putDesired(e)
	}
	t.desired.Problems = append(t.desired.Problems, o.problems...)
	for _, b := range o.backends {
		t.backends[b] = true
	}
	for _, s := range o.httpServices {
		t.httpServices[s] = true
	}
	for _, s := range o.blackholes {
		t.blackholes[s] = true
	}
}
