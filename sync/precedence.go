package sync

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// RoutedAsSpecifiedCondition is the route condition, per parent of ours, that says
// whether Consul 1.15 sends the requests Gateway API gives the route to it. Consul
// orders the routes of a listener its own way (precedence_model.go), which no entry
// the controller writes can change, so the deviation is reported instead.
const RoutedAsSpecifiedCondition = "consul-gateway-controller.github.io/RoutedAsSpecified"

// maxConflictsNamed is how many conflicts a message names; it counts the rest.
const maxConflictsNamed = 3

// routedAsSpecified is the RoutedAsSpecified condition of route on a parent b where it
// is served; ok is false for kinds without precedence (and parents that do not serve
// the route). It is decided from the specs of the routes served on the same listeners,
// never from their status.
func (d *decider) routedAsSpecified(route routeView, target parentTarget, v gatewayVerdict, b parentBinding, generation int64) (metav1.Condition, bool, error) {
	if (route.kind != gatewayapi.HTTPRouteKind && route.kind != gatewayapi.TCPRouteKind) || !b.served() {
		return metav1.Condition{}, false, nil
	}
	models, err := d.listenerModels(route.kind, target, v)
	if err != nil {
		return metav1.Condition{}, false, err
	}
	self := cache.ObjectName{Namespace: route.namespace, Name: route.name}
	var conflicts []precedenceConflict
	var unjudged []unjudgedListener
	for _, l := range b.programmableListeners {
		m, ok := models[l]
		if !ok {
			continue
		}
		ri := m.indexOf(self)
		if ri < 0 {
			continue // left out of Consul on this listener (routeConsulHosts)
		}
		if !m.judged[ri] {
			unjudged = append(unjudged, unjudgedListener{name: m.table.name, matches: m.matches, limit: d.precedenceMemo().maxMatches})
			continue
		}
		conflicts = append(conflicts, m.conflictsOf(ri, route.kind)...)
	}
	return routedCondition(route.kind, route.namespace, conflicts, unjudged, generation), true, nil
}

// routedCondition states conflicts of a route in namespace: the first few, most
// serious first, how many more there are, and why Consul routes them so; and the
// listeners where its precedence was not judged (maxJudgedMatches).
func routedCondition(kind gatewayv1.Kind, namespace string, conflicts []precedenceConflict, unjudged []unjudgedListener, generation int64) metav1.Condition {
	if len(conflicts) == 0 && len(unjudged) > 0 {
		c := condition(RoutedAsSpecifiedCondition, false, ReasonPrecedenceNotJudged, unjudgedMessage(unjudged), generation)
		c.Status = metav1.ConditionUnknown
		return c
	}
	if len(conflicts) == 0 {
		return condition(RoutedAsSpecifiedCondition, true, ReasonRoutedAsSpecified,
			"Consul sends the route's requests where the Gateway API precedence does", generation)
	}
	slices.SortStableFunc(conflicts, func(a, b precedenceConflict) int { return reasonRank[a.reason] - reasonRank[b.reason] })
	shown := conflicts[:min(len(conflicts), maxConflictsNamed)]
	named := make([]string, 0, len(shown))
	var why []string
	for _, c := range shown {
		named = append(named, c.describe(kind, namespace))
		if w := conflictCause(c.reason); !slices.Contains(why, w) {
			why = append(why, w)
		}
	}
	msg := "Consul 1.15 may route elsewhere what the Gateway API gives this route: " + strings.Join(named, "; ")
	if more := len(conflicts) - len(shown); more > 0 {
		msg += fmt.Sprintf("; and %d more", more)
	}
	msg += ". " + strings.Join(why, " ")
	if len(unjudged) > 0 {
		msg += " " + unjudgedMessage(unjudged)
	}
	return condition(RoutedAsSpecifiedCondition, false, conflicts[0].reason, msg, generation)
}

// conflictCause says, once per message, why Consul routes a conflict of reason so.
func conflictCause(reason string) string {
	switch reason {
	case ReasonHiddenByHostname:
		return "Consul serves a host that routes name only from those routes; the spec applies the other routes' rules after theirs."
	case ReasonTieOrderedByConsul:
		return "The spec picks the oldest route (then the first by namespace/name); Consul the one it bound first."
	}
	return "Consul ranks matches by path length, then header count, then query param count: an Exact path does not outrank a PathPrefix of the same path, nor a method match one with more headers."
}

// describe says where the conflict's request goes, to the author of a route in
// namespace: a route of another namespace is not named, and the values of its
// matches are withheld from the example request (docs/status.md).
func (c precedenceConflict) describe(kind gatewayv1.Kind, namespace string) string {
	other := describeRoute(kind, c.other, namespace)
	otherRule := fmt.Sprintf("rule %d of %s", c.otherRule, other)
	if c.otherSelf {
		otherRule = fmt.Sprintf("rule %d of this route", c.otherRule)
	}
	where := "listener " + string(c.listener) + ": "
	switch {
	case c.reason == ReasonHiddenByHostname && c.otherRule < 0:
		return where + fmt.Sprintf("%s is for rule %d here; Consul serves host %s from routes naming it (%s), and none matches: 404", c.request.shown(), c.rule, c.host, other)
	case c.reason == ReasonHiddenByHostname:
		return where + fmt.Sprintf("%s is for rule %d here; Consul serves host %s from routes naming it: %s", c.request.shown(), c.rule, c.host, otherRule)
	case c.reason == ReasonTieOrderedByConsul:
		return where + fmt.Sprintf("%s matches rule %d here and %s alike", c.request.shown(), c.rule, otherRule)
	}
	return where + fmt.Sprintf("%s is for rule %d here; Consul may send it to %s", c.request.shown(), c.rule, otherRule)
}

// oldest is the index of the listener's oldest route (then the first by
// namespace/name): the one the spec gives a TCP listener's connections.
func (t *listenerTable) oldest() int {
	oldest := 0
	for i, r := range t.routes {
		o := t.routes[oldest]
		if r.created.Before(o.created) || (r.created.Equal(o.created) && r.key.String() < o.key.String()) {
			oldest = i
		}
	}
	return oldest
}

// listenerModels are, per listener of target (by its name in the api-gateway entry),
// the precedence models of the routes of kind served on it: which routes are served is
// decided on every call, the model only when they or the listener changed
// (precedenceMemo).
func (d *decider) listenerModels(kind gatewayv1.Kind, target parentTarget, v gatewayVerdict) (map[gatewayv1.SectionName]*listenerModel, error) {
	listeners, _ := target.listeners(v)
	members := make(map[gatewayv1.SectionName]*listenerMembers, len(listeners))
	for _, st := range listeners {
		hostname := ""
		if st.listener.Hostname != nil {
			hostname = string(*st.listener.Hostname)
		}
		members[st.entryName] = &listenerMembers{name: st.listener.Name, hostname: hostname}
	}
	index, value, refers := targetIndex(target)
	objs, err := d.routeIndexers[kind].ByIndex(index, value)
	if err != nil {
		return nil, fmt.Errorf("list %s of parent %s: %w", kind, value, err)
	}
	for _, obj := range objs {
		if err := d.addServedRoute(members, obj, target, v, refers); err != nil {
			return nil, err
		}
	}
	memo := d.precedenceMemo()
	models := make(map[gatewayv1.SectionName]*listenerModel, len(members))
	for entry, m := range members {
		models[entry] = memo.model(listenerModelKey{kind: kind, parent: index + " " + value, listener: entry}, m)
	}
	return models, nil
}

// precedenceMemo is the decider's memo; a decider built without one (a one-shot
// command) keeps nothing.
func (d *decider) precedenceMemo() *precedenceMemo {
	if d.precedence != nil {
		return d.precedence
	}
	return &precedenceMemo{maxMatches: maxJudgedMatches}
}

// targetIndex is the route index and value that find the routes naming target, and
// which of their parentRefs do.
func targetIndex(target parentTarget) (string, string, func(gatewayv1.ParentReference, string) bool) {
	if target.listenerSet == nil {
		return informers.RouteParentGatewayIndex, cache.MetaObjectToName(target.gw).String(), func(ref gatewayv1.ParentReference, ns string) bool {
			return refersTo(ref, ns, target.gw)
		}
	}
	set := *target.listenerSet
	return informers.RouteParentListenerSetIndex, set.String(), func(ref gatewayv1.ParentReference, ns string) bool {
		return gatewayapi.IsListenerSet(ref) && gatewayapi.Referent(ns, ref.Namespace, ref.Name) == set
	}
}

// addServedRoute adds the cached route obj to the members of the listeners of target
// it is served on, once per listener whatever the number of its parentRefs naming it.
func (d *decider) addServedRoute(members map[gatewayv1.SectionName]*listenerMembers, obj any, target parentTarget, v gatewayVerdict, refers func(gatewayv1.ParentReference, string) bool) error {
	view, refused, err := d.precedenceMemo().servedView(d, obj)
	if err != nil || refused {
		return err
	}
	route := &servedRoute{obj: obj, view: view}
	var added []*listenerMembers // the listeners route is on already: it names them once or more
	for _, ref := range view.parentRefs {
		if !refers(ref, view.namespace) {
			continue
		}
		b, err := d.bindParent(view, ref, target, v)
		if err != nil {
			return err
		}
		if !b.served() {
			continue
		}
		for _, l := range b.programmableListeners {
			if m, ok := members[l]; ok && !slices.Contains(added, m) {
				m.routes = append(m.routes, route)
				added = append(added, m)
			}
		}
	}
	return nil
}

// servedView is viewRoute without the backends, which do not change where a request
// goes: the route's binding view, and whether it is refused on every parent.
func (d *decider) servedView(obj any) (routeView, bool, error) {
	kind, ok := gatewayapi.RouteOf(obj)
	if !ok {
		return routeView{}, false, fmt.Errorf("unexpected route object %T", obj)
	}
	spec, err := kind.Spec(obj)
	if err != nil {
		return routeView{}, false, fmt.Errorf("read %s spec: %w", kind.Kind, err)
	}
	route := obj.(metav1.Object) // every route kind is
	view := routeView{kind: kind.Kind, namespace: route.GetNamespace(), name: route.GetName(), parentRefs: spec.ParentRefs, hostnames: spec.Hostnames}
	rules := routeRules{kind: kind.Kind, caps: d.caps, hostnameProblem: routeHostnamesProblem(spec.Hostnames), count: len(spec.BackendRefs), problems: make([]*ruleProblem, len(spec.BackendRefs))}
	if decide, ok := ruleDecisions[kind.Kind]; ok {
		copy(rules.problems, decide(obj, d.caps))
	}
	return view, rules.refused(), nil
}

// newAttachedRoute is the route obj as served on a listener with hostname
// listenerHost; ok is false when the Consul translation leaves it out of the
// listener (routeConsulHosts).
func newAttachedRoute(obj any, view routeView, listenerHost string) (attachedRoute, bool) {
	var listener *gatewayv1.Hostname
	if listenerHost != "" {
		listener = ptrTo(gatewayv1.Hostname(listenerHost))
	}
	intersections, _ := intersectHostnames(listener, view.hostnames)
	hostnames := make([]string, 0, len(intersections))
	for _, h := range intersections {
		hostnames = append(hostnames, string(h))
	}
	if len(hostnames) == 0 {
		hostnames = []string{anyHost}
	}
	consulHosts, ok := routeConsulHosts(view.hostnames, hostnames, listenerHost)
	if !ok {
		return attachedRoute{}, false
	}
	route := attachedRoute{
		key:         cache.ObjectName{Namespace: view.namespace, Name: view.name},
		created:     obj.(metav1.Object).GetCreationTimestamp().Time,
		hostnames:   hostnames,
		consulHosts: consulHosts,
	}
	if http, isHTTP := obj.(*gatewayv1.HTTPRoute); isHTTP {
		route.rules = httpRouteMatches(http.Spec.Rules)
	}
	return route, true
}

// routeConsulHosts are the hostname keys Consul files a route under on a listener,
// given the hostnames Gateway API serves it under there: the listener's own hostname
// for a route without hostnames, else those hostnames less the ones a wildcard among
// them covers. A wildcard other than the listener's hostname cannot be written
// (Consul 1.15 takes no wildcard on an http-route), and the translation leaves the
// route out of the listener: ok is false.
func routeConsulHosts(routeHostnames []gatewayv1.Hostname, served []string, listenerHost string) ([]string, bool) {
	if len(routeHostnames) == 0 {
		return []string{cmp.Or(listenerHost, anyHost)}, true
	}
	var keys []string
	for _, h := range served {
		covered := slices.ContainsFunc(served, func(w string) bool {
			return w != h && gatewayapi.WildcardMatches(gatewayv1.Hostname(w), gatewayv1.Hostname(h))
		})
		if covered {
			continue
		}
		if strings.HasPrefix(h, "*") && h != listenerHost {
			return nil, false
		}
		keys = append(keys, h)
	}
	return keys, true
}

// httpRouteMatches are the matches of each rule as Consul receives them: a rule
// without matches matches every request, and a rule whose matches Consul cannot
// express is left out of Consul (consullimits.HTTPMatchesProblem), so it has none.
func httpRouteMatches(rules []gatewayv1.HTTPRouteRule) [][]routeMatch {
	out := make([][]routeMatch, len(rules))
	for i, rule := range rules {
		if consullimits.HTTPMatchesProblem(rule.Matches) != "" {
			continue
		}
		if len(rule.Matches) == 0 {
			out[i] = []routeMatch{newRouteMatch(gatewayv1.HTTPRouteMatch{})}
			continue
		}
		for _, m := range rule.Matches {
			out[i] = append(out[i], newRouteMatch(m))
		}
	}
	return out
}
