package sync

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	gosync "sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/lru"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// This file keeps the precedence model of each listener (precedence_model.go) from one
// route's sync to the next. An edit of one route judges every route of its Gateway
// again (informers.KeyMapper enqueues the siblings); without a memo each of those syncs
// would build the listener's table and compare its matches anew, so one tenant's
// churn on a shared listener would cost every other tenant's edit that listener's
// whole model, once per route.

// maxJudgedMatches bounds the HTTPRoute matches whose precedence is judged on one
// listener. Judging a route costs up to maxExampleRequests requests, each held against
// every match of the listener, so the judged routes are bounded: the oldest routes
// first (then by namespace/name, the spec's own tie-break), each while its matches fit
// in what is left. A judged route is still held against every route, judged or not; a
// route past the limit is told plainly that its precedence was not judged. So a
// listener's model costs at most 256 routes' judgements, each linear in the
// listener's matches, and a tenant who adds routes cannot push an older route of
// another out of judgement. 256 judges a listener of a few hundred single-match routes
// whole.
const maxJudgedMatches = 256

// listenerModelCacheSize bounds the listeners whose model is kept, servedViewCacheSize
// the routes whose served view is; the least recently used is dropped first, so what
// goes leaves nothing behind for long.
const (
	listenerModelCacheSize = 4096
	servedViewCacheSize    = 65536
)

// precedenceMemo keeps a listenerModel per listener, valid while the inputs it was
// built from are the same.
type precedenceMemo struct {
	// models maps a listenerModelKey to its *listenerModel; nil keeps nothing (every
	// sync builds its own).
	models *lru.Cache
	// views maps a route's servedViewKey to its servedViewEntry; nil keeps none.
	views *lru.Cache
	// maxMatches is maxJudgedMatches, or what a benchmark sets.
	maxMatches int
	// builds and hits count the models built and those found still valid,
	// judgements the routes whose conflicts were computed.
	builds, hits, judgements atomic.Int64
}

func newPrecedenceMemo() *precedenceMemo {
	return &precedenceMemo{models: lru.New(listenerModelCacheSize), views: lru.New(servedViewCacheSize), maxMatches: maxJudgedMatches}
}

// servedViewKey names a route: its kind and namespace/name.
type servedViewKey struct {
	kind gatewayv1.Kind
	name cache.ObjectName
}

// servedViewEntry is a route's servedView at one identity.
type servedViewEntry struct {
	id      routeIdentity
	view    routeView
	refused bool
}

// servedView is d.servedView(obj), computed once per identity of the route: every sync
// of a route of the Gateway views every route naming it.
func (p *precedenceMemo) servedView(d *decider, obj any) (routeView, bool, error) {
	kind, isRoute := gatewayapi.RouteOf(obj)
	route, ok := obj.(metav1.Object)
	if p.views == nil || !ok || !isRoute {
		return d.servedView(obj)
	}
	key := servedViewKey{kind: kind.Kind, name: cache.ObjectName{Namespace: route.GetNamespace(), Name: route.GetName()}}
	id := identityOf(obj)
	if cached, ok := p.views.Get(key); ok && cached.(servedViewEntry).id == id {
		e := cached.(servedViewEntry)
		return e.view, e.refused, nil
	}
	view, refused, err := d.servedView(obj)
	if err != nil {
		return view, refused, err
	}
	p.views.Add(key, servedViewEntry{id: id, view: view, refused: refused})
	return view, refused, nil
}

// listenerModelKey names a listener: the route kind, the parent (a Gateway or a
// ListenerSet, by its index value) and the listener's name in the api-gateway entry.
type listenerModelKey struct {
	kind     gatewayv1.Kind
	parent   string
	listener gatewayv1.SectionName
}

// servedRoute is a cached route object served on a listener, with its binding view.
type servedRoute struct {
	obj  any
	view routeView
}

func (r servedRoute) key() cache.ObjectName {
	return cache.ObjectName{Namespace: r.view.namespace, Name: r.view.name}
}

// listenerMembers are the routes of one kind served on one listener: all a
// listenerModel is made of.
type listenerMembers struct {
	name     gatewayv1.SectionName
	hostname string // "" when the listener has none
	routes   []*servedRoute
}

// routeIdentity is what a served route's part of a model is made of: the route by its
// UID (which fixes its creation time) and the version of its spec: its generation, or,
// for an object no API server counted generations of, its resourceVersion (compared
// for equality only). A status write changes neither, so the routes' own status
// writes keep the model.
type routeIdentity struct {
	uid             types.UID
	generation      int64
	resourceVersion string
}

func identityOf(obj any) routeIdentity {
	o := obj.(metav1.Object) // every route kind is
	id := routeIdentity{uid: o.GetUID(), generation: o.GetGeneration()}
	if id.generation == 0 {
		id.resourceVersion = o.GetResourceVersion()
	}
	return id
}

// modelInputs identifies what a model is made of: the listener's name and hostname,
// and the routes served on it.
type modelInputs struct {
	name     gatewayv1.SectionName
	hostname string
	routes   map[cache.ObjectName]routeIdentity
}

func (m *listenerMembers) inputs() modelInputs {
	in := modelInputs{name: m.name, hostname: m.hostname, routes: make(map[cache.ObjectName]routeIdentity, len(m.routes))}
	for _, r := range m.routes {
		in.routes[r.key()] = identityOf(r.obj)
	}
	return in
}

// madeOf reports whether in are the inputs of members, without sorting them or
// building anything on the way: most syncs find the model unchanged.
func (in modelInputs) madeOf(members *listenerMembers) bool {
	if in.name != members.name || in.hostname != members.hostname || len(in.routes) != len(members.routes) {
		return false
	}
	for _, r := range members.routes {
		if id, ok := in.routes[r.key()]; !ok || id != identityOf(r.obj) {
			return false
		}
	}
	return true
}

// listenerModel is the precedence model of one listener at one set of inputs: its
// table, which routes are judged, and the conflicts of each judged route once asked.
// It is shared by the workers: the table is not changed once built.
type listenerModel struct {
	inputs modelInputs
	table  *listenerTable
	// judged says, per route of table, whether its precedence is judged; matches
	// counts the listener's matches, for the message of a route that is not.
	judged  []bool
	matches int

	mu        gosync.Mutex
	conflicts map[int][]precedenceConflict
	// judgements counts the conflicts computed (precedenceMemo.judgements).
	judgements *atomic.Int64
}

// model returns the listener's model for members, built anew only when its inputs
// changed since the last one.
func (p *precedenceMemo) model(key listenerModelKey, members *listenerMembers) *listenerModel {
	if p.models != nil {
		if cached, ok := p.models.Get(key); ok && cached.(*listenerModel).inputs.madeOf(members) {
			p.hits.Add(1)
			return cached.(*listenerModel)
		}
	}
	slices.SortFunc(members.routes, func(a, b *servedRoute) int {
		return cmp.Or(cmp.Compare(a.view.namespace, b.view.namespace), cmp.Compare(a.view.name, b.view.name))
	})
	m := newListenerModel(members, members.inputs(), p.maxMatches)
	m.judgements = &p.judgements
	p.builds.Add(1)
	if p.models != nil {
		p.models.Add(key, m)
	}
	return m
}

func newListenerModel(members *listenerMembers, inputs modelInputs, maxMatches int) *listenerModel {
	t := &listenerTable{name: members.name, hostname: members.hostname}
	for _, r := range members.routes {
		if route, ok := newAttachedRoute(r.obj, r.view, members.hostname); ok {
			t.routes = append(t.routes, route)
		}
	}
	if len(t.routes) > 0 {
		t.consulMatchesOf(0) // computes every route's: the table is read-only from here
	}
	judged, matches := judgedRoutes(t.routes, maxMatches)
	return &listenerModel{inputs: inputs, table: t, judged: judged, matches: matches, conflicts: map[int][]precedenceConflict{}}
}

// judgedRoutes says which of routes are judged within maxMatches: the oldest first
// (then by namespace/name), each while its matches fit in what is left; and how many
// matches the routes have in all. A route without matches (a TCPRoute) is always
// judged.
func judgedRoutes(routes []attachedRoute, maxMatches int) ([]bool, int) {
	order := make([]int, len(routes))
	total := 0
	for i, r := range routes {
		order[i] = i
		total += matchCount(r)
	}
	slices.SortFunc(order, func(a, b int) int {
		ra, rb := routes[a], routes[b]
		return cmp.Or(ra.created.Compare(rb.created), cmp.Compare(ra.key.String(), rb.key.String()))
	})
	judged := make([]bool, len(routes))
	left := maxMatches
	for _, i := range order {
		if n := matchCount(routes[i]); n <= left {
			judged[i], left = true, left-n
		}
	}
	return judged, total
}

func matchCount(r attachedRoute) int {
	n := 0
	for _, matches := range r.rules {
		n += len(matches)
	}
	return n
}

// indexOf is the index of route key in the model's table, -1 when the listener does
// not serve it in Consul (routeConsulHosts).
func (m *listenerModel) indexOf(key cache.ObjectName) int {
	return slices.IndexFunc(m.table.routes, func(r attachedRoute) bool { return r.key == key })
}

// conflictsOf are the conflicts of route ri, a judged route, computed once per model.
func (m *listenerModel) conflictsOf(ri int, kind gatewayv1.Kind) []precedenceConflict {
	m.mu.Lock()
	cached, ok := m.conflicts[ri]
	m.mu.Unlock()
	if ok {
		return cached
	}
	if m.judgements != nil {
		m.judgements.Add(1)
	}
	// A TCP listener is written with its oldest route alone (tcpListenersServed): Consul
	// gives its connections where the spec does.
	var out []precedenceConflict
	if kind != gatewayapi.TCPRouteKind {
		out = m.table.conflictsOf(ri)
	}
	m.mu.Lock()
	m.conflicts[ri] = out
	m.mu.Unlock()
	return out
}

// unjudgedListener is a listener where a route's precedence was not judged.
type unjudgedListener struct {
	name           gatewayv1.SectionName
	matches, limit int
}

// unjudgedMessage says plainly, for the listeners where it was not judged, that the
// route's precedence was not, and why.
func unjudgedMessage(unjudged []unjudgedListener) string {
	parts := make([]string, 0, len(unjudged))
	for _, u := range unjudged {
		parts = append(parts, fmt.Sprintf("listener %s serves %d matches", u.name, u.matches))
	}
	return fmt.Sprintf("Precedence was not judged for this route (%s): the controller judges the matches of a listener's oldest routes up to %d, "+
		"so Consul 1.15 may send this route's requests elsewhere than the Gateway API precedence says, unreported.",
		strings.Join(parts, "; "), unjudged[0].limit)
}
