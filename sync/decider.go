package sync

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/listers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewaylisters "sigs.k8s.io/gateway-api/pkg/client/listers/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/backends"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// decider computes status from cached objects. It reads listers and indexers only: it
// has no clients and writes nothing.
type decider struct {
	controllerName gatewayv1.GatewayController
	caps           consullimits.Capabilities
	verdicts       ConsulVerdicts
	// deployments is nil when this controller does not deploy gateways.
	deployments GatewayDeployments
	// infrastructureKeys are the spec.infrastructure keys the deployed objects get.
	infrastructureKeys gatewayapi.KeyAllowlist

	classes  gatewaylisters.GatewayClassLister
	gateways gatewaylisters.GatewayLister
	// listenerSets is the ListenerSet cache, indexed by
	// informers.ListenerSetParentGatewayIndex; nil judges no ListenerSet.
	listenerSets cache.Indexer
	namespaces   corelisters.NamespaceLister
	services     corelisters.ServiceLister
	// consulServices says which Consul service a backend Service is, and which
	// Services share it.
	consulServices consulServices
	configs        listers.ResourceIndexer[*v1alpha1.GatewayConfig]
	refs           listenerRefs
	// routeIndexers hold each route kind's cache, indexed by
	// informers.RouteParentGatewayIndex.
	routeIndexers map[gatewayv1.Kind]cache.Indexer
	// precedence keeps each listener's precedence model between syncs; nil keeps
	// none.
	precedence *precedenceMemo
}

// ourGateway resolves a parentRef to a Gateway whose class is ours; ok is false for
// parents of any other kind, missing Gateways and other controllers' Gateways.
func (d *decider) ourGateway(ref gatewayv1.ParentReference, routeNamespace string) (*gatewayv1.Gateway, *gatewayv1.GatewayClass, bool, error) {
	if !gatewayapi.IsGateway(ref) {
		return nil, nil, false, nil
	}
	key := gatewayapi.Referent(routeNamespace, ref.Namespace, ref.Name)
	gw, err := d.gateways.Gateways(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("get Gateway %s: %w", key, err)
	}
	class, ok, err := d.ourClass(string(gw.Spec.GatewayClassName))
	return gw, class, ok, err
}

// ourParent resolves a parentRef to a Gateway of ours, or to a ListenerSet whose parent
// is one; ok is false for any other parent.
func (d *decider) ourParent(ref gatewayv1.ParentReference, routeNamespace string) (parentTarget, *gatewayv1.GatewayClass, bool, error) {
	if !gatewayapi.IsListenerSet(ref) {
		gw, class, ok, err := d.ourGateway(ref, routeNamespace)
		return parentTarget{gw: gw}, class, ok, err
	}
	if d.listenerSets == nil {
		return parentTarget{}, nil, false, nil
	}
	key := gatewayapi.Referent(routeNamespace, ref.Namespace, ref.Name)
	obj, exists, err := d.listenerSets.GetByKey(key.String())
	if err != nil {
		return parentTarget{}, nil, false, fmt.Errorf("get ListenerSet %s: %w", key, err)
	}
	if !exists {
		return parentTarget{}, nil, false, nil
	}
	gw, class, ok, err := d.parentGatewayOf(obj.(*gatewayv1.ListenerSet))
	return parentTarget{gw: gw, listenerSet: &key}, class, ok, err
}

// ourClass returns the named GatewayClass when its controllerName is ours.
func (d *decider) ourClass(name string) (*gatewayv1.GatewayClass, bool, error) {
	class, err := d.classes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("get GatewayClass %s: %w", name, err)
	}
	return class, class.Spec.ControllerName == d.controllerName, nil
}

// routeRules is the decision on a route's hostnames, rules and backends, which holds
// for every parent alike.
type routeRules struct {
	kind gatewayv1.Kind
	// hostnameProblem says why the route's hostnames refuse it, "" when they do not.
	hostnameProblem string
	count           int
	problems        []*ruleProblem // one per rule; nil for a rule Consul can program
	// backend is the first unresolved backendRef's problem, unresolved every
	// unresolved backendRef.
	backend    *backendProblem
	unresolved []BackendRefIndex
	// renamed are the resolved backendRefs whose Consul service is not their
	// Service's name.
	renamed []RenamedBackend
	// narrowed are the resolved backendRefs that reach only their own namespace's
	// instances of their Consul service.
	narrowed []BackendRefIndex
	// renamedNotes say where renamed and narrowed backendRefs send traffic.
	renamedNotes []string
}

// resolvedMessage is the message of ResolvedRefs=True: it names the Consul service of
// every backend not named after its Service, so a user sees where its traffic goes.
func (r routeRules) resolvedMessage() string {
	if len(r.renamedNotes) == 0 {
		return "All references are resolved"
	}
	return "All references are resolved; " + strings.Join(r.renamedNotes, "; ")
}

// refusedOutcome says what becomes of the requests of the rules and backends Consul
// cannot serve, per route kind: the Consul translation routes an HTTPRoute's to a
// service no instance serves, where Envoy answers 503 (see package consul).
var refusedOutcome = map[gatewayv1.Kind]struct{ rules, backends string }{
	gatewayapi.HTTPRouteKind: {
		rules:    "Dropped Rule(s) Consul cannot program, whose requests are answered with HTTP 503: ",
		backends: "; requests for unresolved backends are answered with HTTP 503",
	},
}

// droppedRulesMessage is the PartiallyInvalid message for the refused rules msgs; it
// starts with "Dropped Rule", as the spec asks of that message.
func (r routeRules) droppedRulesMessage(msgs []string) string {
	prefix := "Dropped Rule(s) Consul cannot program: "
	if o, ok := refusedOutcome[r.kind]; ok {
		prefix = o.rules
	}
	return prefix + strings.Join(msgs, "; ")
}

func (r routeRules) invalid() []string {
	var msgs []string
	for _, p := range r.problems {
		if p != nil {
			msgs = append(msgs, p.Message)
		}
	}
	return msgs
}

// dropped returns the indexes of the rules that cannot be programmed.
func (r routeRules) dropped() []int {
	var idx []int
	for i, p := range r.problems {
		if p != nil {
			idx = append(idx, i)
		}
	}
	return idx
}

// allInvalid reports whether no rule can be programmed.
func (r routeRules) allInvalid() bool { return r.count > 0 && len(r.invalid()) == r.count }

// refused reports whether the route is refused on every parent, so nothing of it is
// served: its hostnames cannot be served, or none of its rules can be programmed.
func (r routeRules) refused() bool { return r.hostnameProblem != "" || r.allInvalid() }

// refusal says why a refused route is refused.
func (r routeRules) refusal() string {
	if r.hostnameProblem != "" {
		return r.hostnameProblem
	}
	return strings.Join(r.invalid(), "; ")
}

// parentConditions builds a route's conditions for one parent; verdict is the data
// plane's on the route for that parent (parentVerdict).
func (r routeRules) parentConditions(b parentBinding, verdict Verdict, generation int64) []metav1.Condition {
	invalid := r.invalid()
	var conds []metav1.Condition
	switch {
	case !b.accepted:
		conds = append(conds, condition(gatewayv1.RouteConditionAccepted, false, b.reason, b.message, generation))
	case r.refused():
		conds = append(conds, condition(gatewayv1.RouteConditionAccepted, false, gatewayv1.RouteReasonUnsupportedValue, r.refusal(), generation))
	default:
		conds = append(conds, condition(gatewayv1.RouteConditionAccepted, true, gatewayv1.RouteReasonAccepted, b.message, generation))
		if len(invalid) > 0 {
			conds = append(conds, condition(gatewayv1.RouteConditionPartiallyInvalid, true, gatewayv1.RouteReasonUnsupportedValue,
				r.droppedRulesMessage(invalid), generation))
		}
	}
	if r.backend != nil {
		conds = append(conds, condition(gatewayv1.RouteConditionResolvedRefs, false, r.backend.Reason, r.backend.Message+refusedOutcome[r.kind].backends, generation))
	} else {
		conds = append(conds, condition(gatewayv1.RouteConditionResolvedRefs, true, gatewayv1.RouteReasonResolvedRefs, r.resolvedMessage(), generation))
	}
	if conds[0].Status == metav1.ConditionTrue {
		conds = append(conds, consulCondition(verdict, generation))
	}
	return conds
}

// routeParentStatuses computes the route's status.parents: other controllers' entries
// exactly as they are, then one entry of ours per parentRef that names one of our
// Gateways. Our entries for parentRefs that are gone are dropped.
func (d *decider) routeParentStatuses(route routeView, rules routeRules, existing []gatewayv1.RouteParentStatus, generation int64, now metav1.Time) ([]gatewayv1.RouteParentStatus, RouteDecision, error) {
	decision := RouteDecision{DroppedRules: rules.dropped(), UnresolvedBackends: rules.unresolved, RenamedBackends: rules.renamed, NarrowedBackends: rules.narrowed}
	parents := make([]gatewayv1.RouteParentStatus, 0, len(existing))
	for _, p := range existing {
		if p.ControllerName != d.controllerName {
			parents = append(parents, p)
		}
	}
	verdicts := map[cache.ObjectName]gatewayVerdict{}
	routeKey := cache.ObjectName{Namespace: route.namespace, Name: route.name}
	routeVerdict := d.verdicts.Verdict(route.kind, routeKey)
	for _, ref := range route.parentRefs {
		target, class, ok, err := d.ourParent(ref, route.namespace)
		if err != nil || !ok {
			if err != nil {
				return nil, decision, err
			}
			continue
		}
		gw := target.gw
		key := cache.MetaObjectToName(gw)
		v, seen := verdicts[key]
		if !seen {
			if v, err = d.evaluateGateway(gw, class); err != nil {
				return nil, decision, err
			}
			verdicts[key] = v
		}
		b, err := d.bindParent(route, ref, target, v)
		if err != nil {
			return nil, decision, err
		}
		if b.served() && !rules.refused() {
			decision.Attachments = append(decision.Attachments, Attachment{Gateway: key, Listeners: b.programmableListeners})
		}
		verdict := parentVerdict(routeVerdict, d.bindings(route.kind, routeKey, key, b.programmableListeners))
		if b.accepted && !b.served() {
			verdict = notServedVerdict(b)
		}
		conds := rules.parentConditions(b, verdict, generation)
		routed, ok, err := d.routedAsSpecified(route, target, v, b, generation)
		if err != nil {
			return nil, decision, err
		}
		if ok && !rules.refused() {
			conds = append(conds, routed)
		}
		previous := d.ourParentStatus(existing, ref)
		parents = append(parents, gatewayv1.RouteParentStatus{
			ParentRef:      ref,
			ControllerName: d.controllerName,
			Conditions:     mergeConditions(previous, conds, now),
		})
	}
	return parents, decision, nil
}

// notServedVerdict is the verdict on a parent whose Gateway or attached listeners
// cannot be programmed: nothing is written to Consul for it, so Consul never judges
// it, and waiting for that would say Pending forever.
func notServedVerdict(b parentBinding) Verdict {
	if b.unservable != "" {
		return Verdict{Known: true, Reason: ReasonNotExpressible, Message: "not served: " + b.unservable}
	}
	return Verdict{Known: true, Reason: ReasonListenersNotValid,
		Message: fmt.Sprintf("not served: the listeners the route attaches to (%s) are not valid, see the Gateway's listener status", joinNames(b.listeners))}
}

// bindings are the data plane's verdicts on serving the route on the listeners of
// gateway it is written to.
func (d *decider) bindings(kind gatewayv1.Kind, route, gateway cache.ObjectName, listeners []gatewayv1.SectionName) []Binding {
	out := make([]Binding, len(listeners))
	for i, l := range listeners {
		out[i] = d.verdicts.Binding(kind, route, gateway, l)
	}
	return out
}

// parentVerdict is the verdict on a route for one parent: the route's own verdict,
// narrowed by the bindings on the parent's listeners. A refusal on any listener the
// route should be served on makes the parent refused. A pending binding leaves the
// parent unknown, with the same Pending condition as before the data plane answered:
// a step that changes nothing in status costs no status write (a new route passes
// through one in Consul 1.15), and when it lasts, the Gateway's status says why. A
// listener the data plane said nothing about follows the route's verdict, as the
// route's verdict itself stands until the data plane judges a new version of the
// route.
func parentVerdict(route Verdict, bindings []Binding) Verdict {
	if !route.Known || !route.Programmed {
		return route
	}
	var refused []Binding
	pending := false
	for _, b := range bindings {
		switch b.State {
		case BindingRefused:
			refused = append(refused, b)
		case BindingPending:
			pending = true
		}
	}
	switch {
	case len(refused) > 0:
		return Verdict{Known: true, Reason: refused[0].Reason, Message: refusalMessages(refused)}
	case pending:
		return Verdict{}
	default:
		return route
	}
}

func refusalMessages(bindings []Binding) string {
	msgs := make([]string, len(bindings))
	for i, b := range bindings {
		msgs[i] = b.Message
	}
	return strings.Join(msgs, "; ")
}

func (d *decider) ourParentStatus(existing []gatewayv1.RouteParentStatus, ref gatewayv1.ParentReference) []metav1.Condition {
	for _, p := range existing {
		if p.ControllerName == d.controllerName && apiequality.Semantic.DeepEqual(p.ParentRef, ref) {
			return p.Conditions
		}
	}
	return nil
}

// attachedRoutes counts, per listener of gw, the routes accepted on gw that attach to
// it. It decides from the routes' specs, never from their status, so a Gateway's and
// its routes' status cannot chase each other.
func (d *decider) attachedRoutes(gw *gatewayv1.Gateway, v gatewayVerdict) (map[gatewayv1.SectionName]int32, error) {
	return d.countAttached(informers.RouteParentGatewayIndex, cache.MetaObjectToName(gw).String(), v, func(ref gatewayv1.ParentReference, routeNamespace string) bool {
		return refersTo(ref, routeNamespace, gw)
	}, parentTarget{gw: gw})
}

// countAttached counts, per listener of target, the routes found under value in the
// route index that are accepted on target through a parentRef refers says names it.
func (d *decider) countAttached(index, value string, v gatewayVerdict, refers func(ref gatewayv1.ParentReference, routeNamespace string) bool, target parentTarget) (map[gatewayv1.SectionName]int32, error) {
	attached := map[gatewayv1.SectionName]sets.Set[string]{}
	for _, kind := range sortedKinds(d.routeIndexers) {
		objs, err := d.routeIndexers[kind].ByIndex(index, value)
		if err != nil {
			return nil, fmt.Errorf("list %s of parent %s: %w", kind, value, err)
		}
		for _, obj := range objs {
			route, rules, err := d.viewRoute(obj)
			if err != nil {
				return nil, err
			}
			if rules.refused() {
				continue
			}
			for _, ref := range route.parentRefs {
				if !refers(ref, route.namespace) {
					continue
				}
				b, err := d.bindParent(route, ref, target, v)
				if err != nil {
					return nil, err
				}
				if !b.accepted {
					continue
				}
				for _, l := range b.listeners {
					if attached[l] == nil {
						attached[l] = sets.New[string]()
					}
					attached[l].Insert(string(kind) + "/" + route.namespace + "/" + route.name)
				}
			}
		}
	}
	counts := make(map[gatewayv1.SectionName]int32, len(attached))
	for l, routes := range attached {
		counts[l] = int32(routes.Len())
	}
	return counts, nil
}

// refersTo reports whether ref names gw.
func refersTo(ref gatewayv1.ParentReference, routeNamespace string, gw *gatewayv1.Gateway) bool {
	return gatewayapi.IsGateway(ref) && gatewayapi.Referent(routeNamespace, ref.Namespace, ref.Name) == cache.MetaObjectToName(gw)
}

func sortedKinds(m map[gatewayv1.Kind]cache.Indexer) []gatewayv1.Kind {
	kinds := make([]gatewayv1.Kind, 0, len(m))
	for k := range m {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i] < kinds[j] })
	return kinds
}

// viewRoute returns the binding view and the rule decision of a cached route object.
func (d *decider) viewRoute(obj any) (routeView, routeRules, error) {
	kind, ok := gatewayapi.RouteOf(obj)
	if !ok {
		return routeView{}, routeRules{}, fmt.Errorf("unexpected route object %T", obj)
	}
	spec, err := kind.Spec(obj)
	if err != nil {
		return routeView{}, routeRules{}, err
	}
	route := obj.(metav1.Object) // every route kind is
	view := routeView{kind: kind.Kind, namespace: route.GetNamespace(), name: route.GetName(), parentRefs: spec.ParentRefs, hostnames: spec.Hostnames}
	rules := routeRules{kind: kind.Kind, hostnameProblem: routeHostnamesProblem(spec.Hostnames), count: len(spec.BackendRefs), problems: make([]*ruleProblem, len(spec.BackendRefs))}
	if decide, ok := ruleDecisions[kind.Kind]; ok {
		copy(rules.problems, decide(obj, d.caps))
	}
	for r, refs := range spec.BackendRefs {
		for b, ref := range refs {
			if err := d.checkBackend(&rules, BackendRefIndex{Rule: r, Ref: b}, kind.Kind, view.namespace, ref); err != nil {
				return view, rules, err
			}
		}
	}
	return view, rules, nil
}

// ruleDecisions decide, per route kind, which rules Consul can program: one problem per
// rule, nil for a rule it can. A kind without an entry has every rule programmable as
// far as its rules go; GRPCRoute has none because no listener accepts it at all (see
// routeKindsByProtocol), but its backends are still checked and reported.
var ruleDecisions = map[gatewayv1.Kind]func(route any, caps consullimits.Capabilities) []*ruleProblem{
	gatewayapi.HTTPRouteKind: ruleProblems(func(r *gatewayv1.HTTPRoute) []gatewayv1.HTTPRouteRule { return r.Spec.Rules }, httpRuleProblem),
	gatewayapi.TCPRouteKind:  ruleProblems(func(r *gatewayv1.TCPRoute) []gatewayv1.TCPRouteRule { return r.Spec.Rules }, tcpRuleProblem),
}

// ruleProblems makes a rule decision of a kind from its decision on one rule.
func ruleProblems[R any, Rule any](rules func(R) []Rule, problem func(int, Rule, consullimits.Capabilities) *ruleProblem) func(any, consullimits.Capabilities) []*ruleProblem {
	return func(route any, caps consullimits.Capabilities) []*ruleProblem {
		r, ok := route.(R)
		if !ok {
			return nil
		}
		problems := make([]*ruleProblem, len(rules(r)))
		for i, rule := range rules(r) {
			problems[i] = problem(i, rule, caps)
		}
		return problems
	}
}

// checkBackend records whether the backendRef at index of a route resolves. Every
// backendRef is checked, not only up to the first unresolved one: the others still
// receive traffic, and the Consul translation must know which they are.
func (d *decider) checkBackend(rules *routeRules, index BackendRefIndex, kind gatewayv1.Kind, namespace string, ref gatewayv1.BackendObjectReference) error {
	resolved, problem, err := resolveBackendRef(kind, namespace, ref, d.services, d.refs.grants, d.consulServices)
	if err != nil {
		return err
	}
	if problem == nil {
		consulName := resolved.Service
		if resolved.Narrowed {
			rules.narrowed = append(rules.narrowed, index)
			referent := gatewayapi.Referent(namespace, ref.Namespace, ref.Name)
			note := fmt.Sprintf("backendRef %s is the Consul service %q, %s: it reaches only the instances of namespace %s", referent, consulName, resolved.NarrowedBecause, referent.Namespace)
			if !slices.Contains(rules.renamedNotes, note) {
				rules.renamedNotes = append(rules.renamedNotes, note)
			}
		}
		if consulName != string(ref.Name) {
			rules.renamed = append(rules.renamed, RenamedBackend{Ref: index, Service: consulName})
			why := fmt.Sprintf("as its pods' %s annotation says", backends.ServiceAnnotation)
			if gatewayapi.IsMeshService(ref) {
				why = "as the MeshService's spec.name says"
			}
			note := fmt.Sprintf("backendRef %s is the Consul service %q, %s", gatewayapi.Referent(namespace, ref.Namespace, ref.Name), consulName, why)
			if !slices.Contains(rules.renamedNotes, note) {
				rules.renamedNotes = append(rules.renamedNotes, note)
			}
		}
		return nil
	}
	if rules.backend == nil {
		rules.backend = problem
	}
	rules.unresolved = append(rules.unresolved, index)
	return nil
}

// consulCondition turns a data-plane verdict on a route for one parent into the
// condition that carries it.
func consulCondition(v Verdict, generation int64) metav1.Condition {
	switch {
	case !v.Known:
		return condition(ConsulAcceptedCondition, false, "Pending", "Waiting for Consul to accept the route", generation)
	case v.Programmed:
		return condition(ConsulAcceptedCondition, true, "Accepted", "Consul accepted the route", generation)
	default:
		return condition(ConsulAcceptedCondition, false, v.Reason, v.Message, generation)
	}
}
