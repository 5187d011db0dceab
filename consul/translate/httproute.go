package translate

import (
	"errors"
	"fmt"
	"slices"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	gwdecision "github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

// httpRoute writes the http-route entry of a route that is served somewhere, and
// reports the parent listeners it is left out of (see parentProblems).
func (t *pass) httpRoute(key cache.ObjectName, c ConfirmedRoute) {
	r, ok := c.Route.(*gatewayv1.HTTPRoute)
	if !ok || r == nil {
		return
	}
	parents, dropped := t.routeParents("HTTPRoute", key, c.Decision.Attachments, "http")
	hostnames, authority, parents, unserved := routeHostnames(r.Spec.Hostnames, parents)
	written := len(parents) > 0 && t.httpEntry(key, r, c.Decision, parents, hostnames, authority)
	t.parentProblems("HTTPRoute", key, append(dropped, unserved...), written)
}

// httpEntry writes the http-route entry of route r for parents, and reports whether
// it did: a route without a rule to write has none.
func (t *pass) httpEntry(key cache.ObjectName, r *gatewayv1.HTTPRoute, decision gwdecision.Route, parents []parentListener, hostnames, authority []string) bool {
	var rules []consulapi.HTTPRouteRule
	var exacts [][]consulapi.HTTPMatch
	var backends []backend
	for i, rule := range r.Spec.Rules {
		out, used, problems := t.httpRule(r.Namespace, i, rule, decision)
		for _, p := range problems {
			t.problem("HTTPRoute", key, "%s", p)
		}
		rules = append(rules, out...)
		written := writtenExacts(rule.Matches)
		for range out {
			exacts = append(exacts, written)
		}
		backends = append(backends, used...)
	}
	// Nothing to route: the entry would only claim the hostnames. The problems say why.
	if len(rules) == 0 {
		return false
	}
	rules = exactFirst(rules, exacts)
	if len(authority) > 0 {
		rules = withAuthority(rules, authorityMatch(authority))
	}
	t.put(&consulapi.HTTPRouteConfigEntry{
		Kind:      consulapi.HTTPRoute,
		Name:      t.naming.EntryName(r.Namespace, r.Name),
		Namespace: t.naming.Namespace(r.Namespace),
		Partition: t.naming.Partition,
		Parents:   parentRefs(parents),
		Rules:     rules,
		Hostnames: hostnames,
		Meta:      t.owner.Meta(ownerOf("HTTPRoute", r)),
	})
	t.out.backends = append(t.out.backends, backends...)
	for _, rule := range rules {
		for _, svc := range rule.Services {
			s := consulService{svc.Name, svc.Namespace, svc.Partition}
			if t.naming.isBlackhole(svc.Name, t.opts) {
				t.out.blackholes = append(t.out.blackholes, s)
				continue
			}
			t.out.httpServices = append(t.out.httpServices, s)
		}
	}
	return true
}

// httpRule translates rule index of a route in routeNamespace into the http-route
// rules that serve it, the Services they send traffic to, and the problems to report.
//
// The status pipeline's decision says which rules Consul can program
// (consullimits.HTTPRuleProblem); the translation trusts it. A rule it refused
// (decision.DroppedRules, reported as PartiallyInvalid) keeps its matches and goes to
// the blackhole (see blackhole.go), so its requests never fall through to a broader
// rule; one whose matches Consul cannot hold (an invalid regex) is left out, as it
// selects no request. A rule without a backend that can receive traffic (all
// unresolved, all weight 0, or no backendRefs) goes to the blackhole too, and a rule
// with some such backendRefs sends their share there. With a responder
// (Options.Responder), a RequestRedirect rule goes to it with its redirect
// (redirectRule), and the blackhole is the responder answering 500.
//
// A rule the decision kept but the translation cannot write is a bug
// (TestTranslationExpressesCapabilities keeps the two in step); it goes to the
// blackhole with a problem rather than being written without what it asks for. So
// does one whose entry Envoy would refuse (consullimits.HTTPRouteRuleEnvoyProblem;
// FuzzTranslate keeps that check and the decision's in step).
func (t *pass) httpRule(routeNamespace string, index int, rule gatewayv1.HTTPRouteRule, decision gwdecision.Route) ([]consulapi.HTTPRouteRule, []backend, []string) {
	dropped := slices.Contains(decision.DroppedRules, index)
	if dropped && consullimits.HTTPMatchesProblem(rule.Matches) != "" {
		return nil, nil, nil
	}
	matches, err := httpMatches(rule.Matches)
	if err != nil {
		return nil, nil, []string{fmt.Sprintf("rule %d: %v; the rule is left out of Consul, so its requests may reach other rules", index, err)}
	}
	if dropped {
		return t.refusedRule(routeNamespace, matches), nil, nil
	}
	if redirect := requestRedirect(rule.Filters); redirect != nil && t.opts.Responder.Name != "" {
		return t.redirectRule(routeNamespace, index, matches, redirect, rule.Matches)
	}
	refused := func(err error) ([]consulapi.HTTPRouteRule, []backend, []string) {
		return t.refusedRule(routeNamespace, matches), nil, []string{fmt.Sprintf("rule %d: %v; its requests are answered with HTTP %d", index, err, t.errorStatus())}
	}
	filters, err := httpFilters(rule.Filters)
	if err != nil {
		return refused(err)
	}
	services, used, err := t.ruleServices(routeNamespace, index, rule.BackendRefs, decision)
	if err != nil {
		return refused(err)
	}
	if len(used) == 0 {
		return t.refusedRule(routeNamespace, matches), nil, nil
	}
	rules, err := rewrittenRules(matches, filters, services)
	if err != nil {
		return refused(err)
	}
	// The decision refused what Envoy would refuse (consullimits.HTTPRuleProblem); a
	// rule that still holds some would take every route of its port down with it.
	for _, r := range rules {
		if msg := consullimits.HTTPRouteRuleEnvoyProblem(r); msg != "" {
			return refused(errors.New(msg))
		}
	}
	return rules, used, nil
}

// requestRedirect is a rule's RequestRedirect filter, or nil.
func requestRedirect(filters []gatewayv1.HTTPRouteFilter) *gatewayv1.HTTPRequestRedirectFilter {
	for _, f := range filters {
		if f.Type == gatewayv1.HTTPRouteFilterRequestRedirect && f.RequestRedirect != nil {
			return f.RequestRedirect
		}
	}
	return nil
}

// redirectRule is the rule that sends every request matches select to the
// responder, which answers with the redirect. The rule's backendRefs receive nothing
// (a redirect answers the request) and its other filters change nothing of the
// answer: the CRD allows no URLRewrite beside a redirect, and the status pipeline
// refuses a response header modifier.
func (t *pass) redirectRule(routeNamespace string, index int, matches []consulapi.HTTPMatch, r *gatewayv1.HTTPRequestRedirectFilter, ruleMatches []gatewayv1.HTTPRouteMatch) ([]consulapi.HTTPRouteRule, []backend, []string) {
	rule := consulapi.HTTPRouteRule{
		Matches:  segmentPrefixes(matches),
		Services: []consulapi.HTTPService{t.responder(1, redirectDirective(r, ruleMatches))},
	}
	if msg := consullimits.HTTPRouteRuleEnvoyProblem(rule); msg != "" {
		return t.refusedRule(routeNamespace, matches), nil, []string{fmt.Sprintf("rule %d: %s; its requests are answered with HTTP %d", index, msg, t.errorStatus())}
	}
	return []consulapi.HTTPRouteRule{rule}, nil, nil
}

// refusedRule is the rule that sends every request matches select to the blackhole.
func (t *pass) refusedRule(routeNamespace string, matches []consulapi.HTTPMatch) []consulapi.HTTPRouteRule {
	return []consulapi.HTTPRouteRule{{Matches: segmentPrefixes(matches), Services: []consulapi.HTTPService{t.blackhole(routeNamespace, 1)}}}
}

// ruleServices are the services the backendRefs of rule index send traffic to, and
// the backends among them, as the decision resolved them. A backendRef with weight 0
// receives no traffic and is left out (Consul would turn its 0 into 1, Consul 1.15.4
// agent/structs/config_entry_routes.go:107). The weight of the backendRefs that did
// not resolve goes to the blackhole: Gateway API answers their share of requests with
// 500, and the blackhole answers 503, where giving it to the valid backends would
// answer with a backend the route did not pick. used is empty when no backend can
// receive traffic.
func (t *pass) ruleServices(routeNamespace string, index int, refs []gatewayv1.HTTPBackendRef, decision gwdecision.Route) ([]consulapi.HTTPService, []backend, error) {
	var services []consulapi.HTTPService
	var used []backend
	invalidWeight := 0
	for b, ref := range refs {
		weight := backendWeight(ref.Weight)
		if weight == 0 {
			continue
		}
		resolved, ok := resolvedBackend(decision, gwdecision.BackendRefIndex{Rule: index, Ref: b})
		if !ok {
			invalidWeight += weight
			continue
		}
		backendFilters, err := httpFilters(ref.Filters)
		if err != nil {
			return nil, nil, fmt.Errorf("backendRef %d: %w", b, err)
		}
		services = append(services, consulapi.HTTPService{
			Name:      resolved.consulName(t.naming),
			Namespace: t.naming.Namespace(resolved.Service.Namespace),
			Partition: t.naming.Partition,
			Weight:    weight,
			Filters:   backendFilters,
		})
		used = append(used, resolved)
	}
	if len(used) > 0 && invalidWeight > 0 {
		services = append(services, t.blackhole(routeNamespace, invalidWeight))
	}
	return services, used, nil
}

// backendWeight is a backendRef's weight: 1 when unset (the CRD default).
func backendWeight(w *int32) int {
	if w == nil {
		return 1
	}
	return max(int(*w), 0)
}
