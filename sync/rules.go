package sync

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

// ruleProblem says why one rule cannot be programmed.
type ruleProblem struct {
	Reason  gatewayv1.RouteConditionReason // gatewayv1.RouteReasonUnsupportedValue
	Message string
}

// httpRuleProblem returns nil when Consul (per caps) can program the rule exactly, else
// why not (consullimits.HTTPRuleProblem). Unsupported features are reported, never
// silently dropped: the spec requires a rule an implementation cannot honour to be
// refused, and dropping a filter would change what the route does.
func httpRuleProblem(index int, rule gatewayv1.HTTPRouteRule, caps consullimits.Capabilities) *ruleProblem {
	return unsupportedRule(index, consullimits.HTTPRuleProblem(rule, caps))
}

// tcpRuleProblem returns nil when Consul (per caps) can program the TCP rule exactly
// (consullimits.TCPRuleProblem).
func tcpRuleProblem(index int, rule gatewayv1.TCPRouteRule, caps consullimits.Capabilities) *ruleProblem {
	return unsupportedRule(index, consullimits.TCPRuleProblem(rule, caps))
}

// unsupportedRule prefixes the rule index, the one thing every message needs to say;
// no message is no problem.
func unsupportedRule(index int, msg string) *ruleProblem {
	if msg == "" {
		return nil
	}
	return &ruleProblem{
		Reason:  gatewayv1.RouteReasonUnsupportedValue,
		Message: fmt.Sprintf("rule %d: %s", index, msg),
	}
}

// routeRules is the decision on a route's hostnames, rules and backends, which holds
// for every parent alike.
type routeRules struct {
	kind gatewayv1.Kind
	// caps say what becomes of refused requests (refusedOutcome).
	caps consullimits.Capabilities
	// hostnameProblem says why the route's hostnames refuse it, "" when they do not.
	hostnameProblem string
	count           int
	problems        []*ruleProblem // one per rule; nil for a rule Consul can program
	// backend is the first unresolved backendRef's problem.
	backend *backendProblem
	// backends are what every backendRef resolved to, in rule and backendRef order.
	backends []decision.Backend
	// renamedNotes say where renamed and narrowed backendRefs send traffic.
	renamedNotes []string
}

// note adds a note on where a backendRef sends traffic, once.
func (r *routeRules) note(note string) {
	if !slices.Contains(r.renamedNotes, note) {
		r.renamedNotes = append(r.renamedNotes, note)
	}
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
// cannot serve, per route kind: the Consul translation routes an HTTPRoute's to the
// responder, which answers 500, or without one to a service no instance serves, where
// Envoy answers 503 (see package consul). ok is false for kinds that have none.
func refusedOutcome(kind gatewayv1.Kind, caps consullimits.Capabilities) (rules, backends string, ok bool) {
	if kind != gatewayapi.HTTPRouteKind {
		return "", "", false
	}
	status := caps.RefusedStatus()
	return fmt.Sprintf("Dropped Rule(s) Consul cannot program, whose requests are answered with HTTP %d: ", status),
		fmt.Sprintf("; requests for unresolved backends are answered with HTTP %d", status), true
}

// droppedRulesMessage is the PartiallyInvalid message for the refused rules msgs; it
// starts with "Dropped Rule", as the spec asks of that message.
func (r routeRules) droppedRulesMessage(msgs []string) string {
	prefix := "Dropped Rule(s) Consul cannot program: "
	if rules, _, ok := refusedOutcome(r.kind, r.caps); ok {
		prefix = rules
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
func (r routeRules) parentConditions(b parentBinding, verdict contract.Verdict, generation int64) []metav1.Condition {
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
		_, backends, _ := refusedOutcome(r.kind, r.caps)
		conds = append(conds, condition(gatewayv1.RouteConditionResolvedRefs, false, r.backend.Reason, r.backend.Message+backends, generation))
	} else {
		conds = append(conds, condition(gatewayv1.RouteConditionResolvedRefs, true, gatewayv1.RouteReasonResolvedRefs, r.resolvedMessage(), generation))
	}
	if conds[0].Status == metav1.ConditionTrue {
		conds = append(conds, consulCondition(verdict, generation))
	}
	return conds
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
