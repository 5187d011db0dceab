package translate

import (
	"cmp"
	"maps"
	"reflect"
	"slices"
	"strings"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	gwdecision "github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

// Translator is Translate kept up to date by changes: it holds the snapshot, each
// object's translation together with everything that translation read, and who reads
// what. A change translates the objects it names, then the objects that read
// something the change made different (the routes of a Gateway whose listeners moved,
// the tcp-routes of a service that became http), and nothing else: its cost is in
// proportion to the change, not to the world.
//
// Confirmed objects and cached Secrets and Services are never modified in place (a
// new version is a new object), so "the same object" is pointer identity; no
// resourceVersion is involved.
type Translator struct {
	state *pass
	memo  map[unit]*objectTranslation
	// claims are, per entry key, the units whose translation put an entry there, in
	// translation order: the first one's entry is desired (the first-writer rule of
	// putDesired, kept across changes).
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

// unit is one thing the translation translates on its own, in translation order:
// Gateways first (routes bind only to the listeners that were written), then routes of
// each kind in routeTranslations' order, then the service-defaults of the backends and
// of the blackholes the written http-routes use.
type unit struct {
	kind unitKind
	// key is a Gateway's or route's, a backend's Service, or a blackhole service's
	// namespace and name; name is a backend's Consul name or a blackhole's partition.
	key      cache.ObjectName
	name     string
	mesh     bool // a backend's MeshService
	narrowed bool // a backend reaching only its namespace's instances
}

func backendUnit(b backend) unit {
	return unit{kind: unitBackend, key: b.Service, name: b.Consul, mesh: b.MeshService, narrowed: b.Narrowed}
}

func (u unit) backend() backend {
	return backend{Service: u.key, Consul: u.name, MeshService: u.mesh, Narrowed: u.narrowed}
}

// subsetsUnit is the service-resolver of a Consul service that narrowed backends
// reach subsets of.
func subsetsUnit(s consulService) unit {
	return unit{kind: unitSubsets, key: cache.ObjectName{Namespace: s.namespace, Name: s.name}, name: s.partition}
}

func blackholeUnit(s consulService) unit {
	return unit{kind: unitBlackhole, key: cache.ObjectName{Namespace: s.namespace, Name: s.name}, name: s.partition}
}

func (u unit) blackhole() consulService { return u.consulService() }

func (u unit) subsetsOf() consulService { return u.consulService() }

// consulService is the Consul service of a blackhole or subsets unit.
func (u unit) consulService() consulService {
	return consulService{name: u.key.Name, namespace: u.key.Namespace, partition: u.name}
}

// subsetsSource is what a subsets unit translates: a Consul service and the
// namespaces whose subsets it has, joined.
type subsetsSource struct {
	service    consulService
	namespaces string
}

type unitKind int

const (
	unitGateway unitKind = iota
	unitHTTPRoute
	unitTCPRoute
	unitBackend
	unitBlackhole
	unitSubsets // after unitBackend, whose translations say which subsets are used
)

// compareUnits orders units as a whole translation visits them.
func compareUnits(a, b unit) int {
	return cmp.Or(cmp.Compare(a.kind, b.kind), compareObjectNames(a.key, b.key), cmp.Compare(a.name, b.name),
		compareBools(a.mesh, b.mesh), compareBools(a.narrowed, b.narrowed))
}

func compareBools(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
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
// and Services are the referenced ones as the cache holds them now.
type Changes Snapshot

// Delta is what a change did to the desired state.
type Delta struct {
	// Entries holds each key whose desired entry changed: the new one, or nil when
	// nothing is desired there any more.
	Entries map[EntryKey]consulapi.ConfigEntry
	// Problems is every problem, sorted, when ProblemsChanged.
	Problems        []Problem
	ProblemsChanged bool
	// ReleasedSecrets and ReleasedServices are the changed Secrets and Services no
	// translation reads: the translator holds them no more.
	ReleasedSecrets, ReleasedServices []cache.ObjectName
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
	diffObjects(held.Services, s.Services, c.Services, func(a, b *corev1.Service) bool { return a == b })
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
	delta.ReleasedServices = releaseUnread(tr.state.snap.Services, changes.Services, tr.readers, readService)
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
	for key, s := range changes.Services {
		tr.touch(lookupKey{readService, key})
		setOrDelete(snap.Services, key, s, s == nil)
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

// translateUnit brings one unit's translation up to date with what it reads now.
func (tr *Translator) translateUnit(u unit) {
	t := tr.state
	prev := tr.memo[u]
	source, decision, translate, ok := tr.source(u)
	if !ok {
		if prev != nil {
			tr.withdraw(u, prev)
			delete(tr.memo, u)
		}
		return
	}
	if prev != nil && t.stillHolds(prev, source, decision) {
		prev.source = source // the newest allocation of the version: the other can go
		return
	}
	out := t.translateObject(source, decision, translate)
	if u.kind < unitBackend { // a Gateway or a route
		tr.translated++
	}
	if prev != nil {
		keepEqual(out, prev)
		tr.withdraw(u, prev)
	}
	tr.install(u, out)
	tr.memo[u] = out
}

// source is what unit u translates now, and how; ok is false when it is gone.
func (tr *Translator) source(u unit) (source any, decision *gwdecision.Route, translate func(), ok bool) {
	t := tr.state
	switch u.kind {
	case unitGateway:
		gw := t.snap.Gateways[u.key]
		return gw, nil, func() { t.gateway(u.key, gw) }, gw != nil
	case unitBackend:
		b := u.backend()
		if b.Narrowed {
			return b, nil, func() { t.narrowedBackend(b) }, t.backends[b] > 0
		}
		return b, nil, func() { t.backendDefaults(b) }, t.backends[b] > 0 && t.opts.ManageServiceDefaults && !b.MeshService
	case unitSubsets:
		s := u.subsetsOf()
		// The source names the namespaces, so a change of them translates the unit anew.
		source := subsetsSource{s, strings.Join(slices.Sorted(maps.Keys(t.subsets[s])), ",")}
		return source, nil, func() { t.put(subsetsResolver(s, t.subsets[s], t.naming, t.owner)) }, len(t.subsets[s]) > 0
	case unitBlackhole:
		s := u.blackhole()
		return s, nil, func() { t.put(blackholeDefaults(s, t.naming, t.owner)) }, t.blackholes[s] > 0
	}
	for _, rt := range routeTranslations {
		if rt.unit == u.kind {
			c, found := t.snap.Routes[rt.kind][u.key]
			return c.Route, &c.Decision, func() { rt.translate(t, u.key, c) }, found
		}
	}
	return nil, nil, nil, false
}

// install adds a unit's translation to the desired state and to what others read.
func (tr *Translator) install(u unit, o *objectTranslation) {
	t := tr.state
	seen := map[EntryKey]bool{}
	for _, e := range o.entries {
		key := KeyOf(e)
		if seen[key] {
			continue // one unit's first entry under a key is its claim
		}
		seen[key] = true
		tr.replacing(key)
		claims := tr.claims[key]
		i, _ := slices.BinarySearchFunc(claims, u, func(c claim, u unit) int { return compareUnits(c.by, u) })
		tr.claims[key] = slices.Insert(claims, i, claim{by: u, entry: e})
	}
	if len(o.problems) > 0 {
		tr.problems[u] = o.problems
		tr.problemsChanged = true
	}
	if o.gateway != nil {
		tr.touch(lookupKey{readGateway, u.key})
		t.gateways[u.key] = o.gateway
	}
	for _, b := range o.backends {
		if t.backends[b]++; t.backends[b] == 1 {
			tr.dirty[backendUnit(b)] = true
		}
	}
	for _, s := range o.httpServices {
		tr.touch(lookupKey{readHTTPService, s})
		t.httpServices[s]++
	}
	for _, s := range o.blackholes {
		if t.blackholes[s]++; t.blackholes[s] == 1 {
			tr.dirty[blackholeUnit(s)] = true
		}
	}
	for _, use := range o.subsets {
		if t.subsets[use.service] == nil {
			t.subsets[use.service] = map[string]int{}
		}
		if t.subsets[use.service][use.kubeNamespace]++; t.subsets[use.service][use.kubeNamespace] == 1 {
			tr.dirty[subsetsUnit(use.service)] = true
		}
	}
	for _, r := range o.reads {
		k := lookupKey{r.kind, r.key}
		if tr.readers[k] == nil {
			tr.readers[k] = map[unit]struct{}{}
		}
		tr.readers[k][u] = struct{}{}
	}
}

// withdraw takes a unit's translation out of the desired state and of what others
// read: install undone.
func (tr *Translator) withdraw(u unit, o *objectTranslation) {
	t := tr.state
	for _, e := range o.entries {
		key := KeyOf(e)
		i := slices.IndexFunc(tr.claims[key], func(c claim) bool { return c.by == u })
		if i < 0 {
			continue // a second entry of the unit under the key: not a claim
		}
		tr.replacing(key)
		if tr.claims[key] = slices.Delete(tr.claims[key], i, i+1); len(tr.claims[key]) == 0 {
			delete(tr.claims, key)
		}
	}
	if _, had := tr.problems[u]; had {
		delete(tr.problems, u)
		tr.problemsChanged = true
	}
	if o.gateway != nil {
		tr.touch(lookupKey{readGateway, u.key})
		delete(t.gateways, u.key)
	}
	for _, b := range o.backends {
		if t.backends[b]--; t.backends[b] == 0 {
			delete(t.backends, b)
			tr.dirty[backendUnit(b)] = true
		}
	}
	for _, s := range o.httpServices {
		tr.touch(lookupKey{readHTTPService, s})
		if t.httpServices[s]--; t.httpServices[s] == 0 {
			delete(t.httpServices, s)
		}
	}
	for _, s := range o.blackholes {
		if t.blackholes[s]--; t.blackholes[s] == 0 {
			delete(t.blackholes, s)
			tr.dirty[blackholeUnit(s)] = true
		}
	}
	for _, use := range o.subsets {
		namespaces := t.subsets[use.service]
		if namespaces[use.kubeNamespace]--; namespaces[use.kubeNamespace] == 0 {
			delete(namespaces, use.kubeNamespace)
			tr.dirty[subsetsUnit(use.service)] = true
		}
		if len(namespaces) == 0 {
			delete(t.subsets, use.service)
		}
	}
	for _, r := range o.reads {
		k := lookupKey{r.kind, r.key}
		delete(tr.readers[k], u)
		if len(tr.readers[k]) == 0 {
			delete(tr.readers, k)
		}
	}
}

// replacing records what was desired under key before the change altered it.
func (tr *Translator) replacing(key EntryKey) {
	if _, ok := tr.replaced[key]; ok {
		return
	}
	var was consulapi.ConfigEntry
	if claims := tr.claims[key]; len(claims) > 0 {
		was = claims[0].entry
	}
	tr.replaced[key] = was
}

// sortedProblems is every unit's problems, sorted.
func (tr *Translator) sortedProblems() []Problem {
	var all []Problem
	for _, ps := range tr.problems {
		all = append(all, ps...)
	}
	return sortProblems(all)
}

// releaseUnread forgets the changed references no translation reads, and returns
// their keys.
func releaseUnread[V any](held, changed map[cache.ObjectName]V, readers map[lookupKey]map[unit]struct{}, kind readKind) []cache.ObjectName {
	var released []cache.ObjectName
	for key := range changed {
		if _, read := readers[lookupKey{kind, key}]; !read {
			delete(held, key)
			released = append(released, key)
		}
	}
	return released
}

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
	case readService:
		return t.snap.Services[key.(cache.ObjectName)]
	case readGateway:
		return t.gateways[key.(cache.ObjectName)]
	case readHTTPService:
		return t.httpServices[key.(consulService)] > 0
	case readListenerSets:
		return listenerSetsVersion(t.listenerSets[key.(cache.ObjectName)])
	}
	return nil
}
