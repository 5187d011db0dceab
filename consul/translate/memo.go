package translate

import (
	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Translator is Translate kept up to date by changes: it holds the snapshot, each
// object's translation together with everything that translation read, and who reads
// what. A change translates the objects it names, then the objects that read
// something the change made different (the routes of a Gateway whose listeners moved,
// the tcp-routes of a service that became http), and nothing else: its cost is in
// proportion to the change, not to the world.
//
// Confirmed objects and cached Secrets are never modified in place (a
// new version is a new object), so "the same object" is pointer identity; no
// resourceVersion is involved.
type Translator struct {
	state *pass
	memo  map[unit]*objectTranslation
	// claims are, per entry key, the units whose translation put an entry there, in
	// translation order: the first one's entry is desired, and stays so across
	// changes until that unit withdraws it (first writer wins).
	claims map[EntryKey][]claim
	// problems are the units' problems; sorted holds them all, sorted, as of the last
	// change to any.
	problems map[unit][]Problem
	sorted   []Problem
	// readers are, per lookup, the units whose translation made it.
	readers map[lookupKey]map[unit]struct{}

	// What the change in progress did.
	dirty           map[unit]bool
	before          map[lookupKey]any // what a lookup found before the change touched it
	replaced        map[EntryKey]consulapi.ConfigEntry
	problemsChanged bool
	translated      int
}

// claim is one unit's entry under a key.
type claim struct {
	by    unit
	entry consulapi.ConfigEntry
}

// lookupKey is one thing a translation can look up (see pass.lookup).
type lookupKey struct {
	kind readKind
	key  any
}

// Changes are new versions of what a snapshot holds, by key; a zero value (a nil
// object, a ConfirmedRoute without Route) says the key holds nothing any more. Secrets
// are the referenced ones as the cache holds them now.
type Changes Snapshot

// Delta is what a change did to the desired state.
type Delta struct {
	// Entries holds each key whose desired entry changed: the new one, or nil when
	// nothing is desired there any more.
	Entries map[EntryKey]consulapi.ConfigEntry
	// Problems is every problem, sorted, when ProblemsChanged.
	Problems        []Problem
	ProblemsChanged bool
	// ReleasedSecrets are the changed Secrets no translation reads: the translator
	// holds them no more.
	ReleasedSecrets []cache.ObjectName
}

// NewTranslator returns a Translator for one syncer's naming, ownership and options.
func NewTranslator(n Naming, o Ownership, opts Options) *Translator {
	return &Translator{
		state:    newPass(n, o, opts),
		memo:     map[unit]*objectTranslation{},
		claims:   map[EntryKey][]claim{},
		problems: map[unit][]Problem{},
		readers:  map[lookupKey]map[unit]struct{}{},
	}
}

// Translated is how many Gateways and routes the last change translated anew.
func (tr *Translator) Translated() int { return tr.translated }

// Translate brings the translator to snapshot s and returns the whole desired state.
// It compares s with the held snapshot to find what changed, which costs a walk over
// s; Update, given the changes, does not.
func (tr *Translator) Translate(s Snapshot) Desired {
	tr.Update(tr.changesTo(s))
	return tr.Desired()
}

// Desired is the whole desired state as of the last change.
func (tr *Translator) Desired() Desired {
	d := Desired{Entries: make(map[EntryKey]consulapi.ConfigEntry, len(tr.claims)), Problems: tr.sorted}
	for key, claims := range tr.claims {
		d.Entries[key] = claims[0].entry
	}
	return d
}

// changesTo lists what differs between the held snapshot and s.
func (tr *Translator) changesTo(s Snapshot) Changes {
	held := tr.state.snap
	c := Changes(NewSnapshot())
	diffObjects(held.Gateways, s.Gateways, c.Gateways, func(a, b *gatewayv1.Gateway) bool { return a == b })
	diffObjects(held.ListenerSets, s.ListenerSets, c.ListenerSets, func(a, b *gatewayv1.ListenerSet) bool { return a == b })
	diffObjects(held.Secrets, s.Secrets, c.Secrets, func(a, b *corev1.Secret) bool { return a == b })
	for _, rt := range routeTranslations {
		diffObjects(held.Routes[rt.kind], s.Routes[rt.kind], c.Routes[rt.kind], func(a, b ConfirmedRoute) bool {
			return a.Route == b.Route && a.Decision.Equal(b.Decision)
		})
	}
	return c
}

// diffObjects adds to changes what next holds differently from held, and a zero value
// for what it no longer holds.
func diffObjects[V any](held, next, changes map[cache.ObjectName]V, same func(a, b V) bool) {
	for key, v := range next {
		if h, ok := held[key]; !ok || !same(h, v) {
			changes[key] = v
		}
	}
	for key := range held {
		if _, ok := next[key]; !ok {
			var zero V
			changes[key] = zero
		}
	}
}

// Update applies changes to the held snapshot, translates what they touch, and
// returns what that did to the desired state.
func (tr *Translator) Update(changes Changes) Delta {
	tr.dirty = map[unit]bool{}
	tr.before = map[lookupKey]any{}
	tr.replaced = map[EntryKey]consulapi.ConfigEntry{}
	tr.problemsChanged = false
	tr.translated = 0
	tr.applyChanges(changes)
	tr.settle()

	delta := Delta{Entries: make(map[EntryKey]consulapi.ConfigEntry, len(tr.replaced))}
	for key, old := range tr.replaced {
		var now consulapi.ConfigEntry
		if claims := tr.claims[key]; len(claims) > 0 {
			now = claims[0].entry
		}
		if now != old {
			delta.Entries[key] = now
		}
	}
	if tr.problemsChanged {
		tr.sorted = tr.sortedProblems()
		delta.Problems, delta.ProblemsChanged = tr.sorted, true
	}
	delta.ReleasedSecrets = releaseUnread(tr.state.snap.Secrets, changes.Secrets, tr.readers, readSecret)
	tr.dirty, tr.before, tr.replaced = nil, nil, nil
	return delta
}

// applyChanges puts changes into the held snapshot and marks what they touch.
func (tr *Translator) applyChanges(changes Changes) {
	snap := tr.state.snap
	for key, gw := range changes.Gateways {
		setOrDelete(snap.Gateways, key, gw, gw == nil)
		tr.dirty[unit{kind: unitGateway, key: key}] = true
	}
	for _, rt := range routeTranslations {
		for key, c := range changes.Routes[rt.kind] {
			setOrDelete(snap.Routes[rt.kind], key, c, c.Route == nil)
			tr.dirty[unit{kind: rt.unit, key: key}] = true
		}
	}
	for key, s := range changes.Secrets {
		tr.touch(lookupKey{readSecret, key})
		setOrDelete(snap.Secrets, key, s, s == nil)
	}
	// A ListenerSet's Gateway reads the group it was in and the group it is in now.
	parents := map[cache.ObjectName]bool{}
	for key, set := range changes.ListenerSets {
		if old, ok := snap.ListenerSets[key]; ok {
			addListenerSetParent(parents, old)
		}
		addListenerSetParent(parents, set)
		setOrDelete(snap.ListenerSets, key, set, set == nil)
	}
	for parent := range parents {
		tr.touch(lookupKey{readListenerSets, parent})
		group := acceptedListenerSetsOf(snap.ListenerSets, parent)
		setOrDelete(tr.state.listenerSets, parent, group, len(group) == 0)
	}
}

func setOrDelete[V any](m map[cache.ObjectName]V, key cache.ObjectName, v V, gone bool) {
	if gone {
		delete(m, key)
		return
	}
	m[key] = v
}

// settle translates the dirty units, lowest kind first, and marks the readers of
// every lookup the translations changed, until nothing is dirty. Readers are always of
// a later kind than what they read, so each kind is visited once.
func (tr *Translator) settle() {
	for {
		tr.markReadersOfChanged()
		var next []unit
		for u := range tr.dirty {
			if len(next) == 0 || u.kind < next[0].kind {
				next = append(next[:0], u)
			} else if u.kind == next[0].kind {
				next = append(next, u)
			}
		}
		if len(next) == 0 {
			return
		}
		for _, u := range next {
			delete(tr.dirty, u)
			tr.translateUnit(u)
		}
	}
}

// touch records what a lookup finds before the change alters it.
func (tr *Translator) touch(k lookupKey) {
	if _, ok := tr.before[k]; !ok {
		tr.before[k] = tr.state.lookup(k.kind, k.key)
	}
}

// markReadersOfChanged marks dirty the readers of every touched lookup that finds
// something else now.
func (tr *Translator) markReadersOfChanged() {
	for k, was := range tr.before {
		if tr.state.lookup(k.kind, k.key) != was {
			for u := range tr.readers[k] {
				tr.dirty[u] = true
			}
		}
	}
	clear(tr.before)
}
