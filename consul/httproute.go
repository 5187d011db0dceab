package consul

import (
	"fmt"
	"slices"
	"strings"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// httpRoute writes the http-route entry of a route that is served somewhere.
func (t *translator) httpRoute(key cache.ObjectName, c ConfirmedRoute) {
	r, ok := c.Route.(*gatewayv1.HTTPRoute)
	if !ok || r == nil {
		return
	}
	parents := t.routeParents("HTTPRoute", key, c.Decision.Attachments, "http")
	if len(parents) == 0 {
		return
	}
	hostnames, parents, dropped := routeHostnames(r.Spec.Hostnames, parents)
	for _, d := range dropped {
		t.problem("HTTPRoute", key, "%s", d)
	}
	if len(parents) == 0 {
		return
	}
	resolved := refsResolved(r.Status.Parents, t.owner.Controller)
	var rules []consulapi.HTTPRouteRule
	var backends []cache.ObjectName
	for i, rule := range r.Spec.Rules {
		if slices.Contains(c.Decision.DroppedRules, i) {
			continue // reported by the status pipeline (PartiallyInvalid)
		}
		out, used, problems := t.httpRule(r.Namespace, i, rule, resolved)
		for _, p := range problems {
			t.problem("HTTPRoute", key, "%s", p)
		}
		if out != nil {
			rules = append(rules, *out)
			backends = append(backends, used...)
		}
	}
	// Nothing to route: the entry would only claim the hostnames. The problems say why.
	if len(rules) == 0 {
		return
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
			t.out.httpServices = append(t.out.httpServices, consulService{svc.Name, svc.Namespace, svc.Partition})
		}
	}
}

// httpRule translates rule index of a route in routeNamespace. It returns nil when the
// rule is left out, with the problems that say why, and the Services it sends traffic
// to.
//
// Backends: a backendRef with weight 0 receives no traffic and is left out (Consul
// would turn its 0 into 1, config_entry_routes.go:107). A backendRef that cannot be
// resolved (see backendProblem) is left out too. Gateway API wants its share of
// requests answered with 500; Consul's http-route cannot answer anything itself, so:
//
//   - when some backends remain, they receive that share as well: the route keeps
//     serving, and a Problem says the split differs;
//   - when none remains (all invalid, all weight 0, or no backendRefs), the rule is left
//     out and a Problem says so. Its requests then get what Consul gives a request no
//     rule matches, or go to another rule that matches them, instead of a 500.
func (t *translator) httpRule(routeNamespace string, index int, rule gatewayv1.HTTPRouteRule, resolved bool) (*consulapi.HTTPRouteRule, []cache.ObjectName, []string) {
	if field := untranslatedField(rule); field != "" {
		return nil, nil, []string{fmt.Sprintf("rule %d: %s %s; the rule is left out of Consul", index, field, consullimits.NotSupported)}
	}
	matches, err := httpMatches(rule.Matches)
	if err != nil {
		return nil, nil, []string{fmt.Sprintf("rule %d: %v; the rule is left out of Consul", index, err)}
	}
	filters, err := httpFilters(rule.Filters)
	if err != nil {
		return nil, nil, []string{fmt.Sprintf("rule %d: %v; the rule is left out of Consul", index, err)}
	}
	if !rewrites(rule) {
		matches = segmentPrefixes(matches)
	}
	var services []consulapi.HTTPService
	var used []cache.ObjectName
	var invalid []string
	for b, ref := range rule.BackendRefs {
		weight := backendWeight(ref.Weight)
		if weight == 0 {
			continue
		}
		key, why := backendProblem("HTTPRoute", routeNamespace, ref.BackendObjectReference, t.service, resolved)
		if why != "" {
			invalid = append(invalid, fmt.Sprintf("backendRef %d (%s) %s", b, key, why))
			continue
		}
		backendFilters, err := httpFilters(ref.Filters)
		if err != nil {
			return nil, nil, []string{fmt.Sprintf("rule %d: backendRef %d: %v; the rule is left out of Consul", index, b, err)}
		}
		services = append(services, consulapi.HTTPService{
			Name:      t.naming.ServiceName(key.Name),
			Namespace: t.naming.Namespace(key.Namespace),
			Partition: t.naming.Partition,
			Weight:    weight,
			Filters:   backendFilters,
		})
		used = append(used, key)
	}
	if len(services) == 0 {
		why := "no backendRef has a weight above 0"
		switch {
		case len(invalid) > 0:
			why = strings.Join(invalid, "; ")
		case len(rule.BackendRefs) == 0:
			why = "it has no backendRefs"
		}
		return nil, nil, []string{fmt.Sprintf("rule %d: no backend can receive its requests (%s); Gateway API answers them with 500, which Consul's http-route cannot express, so the rule is left out of Consul", index, why)}
	}
	var problems []string
	if len(invalid) > 0 {
		problems = append(problems, fmt.Sprintf("rule %d: %s; Consul's http-route cannot answer its share of requests with 500, so the rule's other backends receive it", index, strings.Join(invalid, "; ")))
	}
	return &consulapi.HTTPRouteRule{Matches: matches, Filters: filters, Services: services}, used, problems
}

// backendWeight is a backendRef's weight: 1 when unset (the CRD default).
func backendWeight(w *int32) int {
	if w == nil {
		return 1
	}
	return max(int(*w), 0)
}

// refsResolved reports whether the route's confirmed status, in a parent entry of ours,
// says every backendRef resolved. The status pipeline computes one ResolvedRefs for the
// whole route, so any parent of ours tells.
func refsResolved(parents []gatewayv1.RouteParentStatus, controller string) bool {
	for _, p := range parents {
		if string(p.ControllerName) == controller && conditionIs(p.Conditions, string(gatewayv1.RouteConditionResolvedRefs), metav1.ConditionTrue) {
			return true
		}
	}
	return false
}

// backendProblem returns the Service a backendRef of a route of kind in routeNamespace
// names, and why it cannot be programmed ("" when it can).
//
// What the snapshot shows is checked here: a core Service (group "", kind Service, the
// CRD defaults), present, not ExternalName, with the port the ref names. What it does
// not show is taken from the confirmed status: a ReferenceGrant for a Service in
// another namespace, and for an HTTPRoute whether the port's appProtocol is one Consul
// speaks (the status pipeline's list). ResolvedRefs True vouches for both. When it is
// not True, its message names only the first failing backendRef, so a backendRef
// either of those checks could have failed is left out: a cross-namespace Service, or
// an HTTPRoute port with an appProtocol other than http. That errs towards not
// sending traffic, never towards bypassing a ReferenceGrant.
func backendProblem(kind, routeNamespace string, ref gatewayv1.BackendObjectReference, service func(cache.ObjectName) *corev1.Service, resolved bool) (cache.ObjectName, string) {
	key := gatewayapi.Referent(routeNamespace, ref.Namespace, ref.Name)
	if !gatewayapi.RefersTo(ref.Group, ref.Kind, gatewayapi.CoreGroup, gatewayapi.ServiceKind) {
		return key, "is not a core Service"
	}
	svc := service(key)
	if svc == nil {
		return key, "names a Service that does not exist"
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return key, "names an ExternalName Service"
	}
	if ref.Port == nil {
		return key, "has no port"
	}
	i := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == *ref.Port })
	if i < 0 {
		return key, fmt.Sprintf("names port %d, which the Service does not have", *ref.Port)
	}
	if resolved {
		return key, ""
	}
	if key.Namespace != routeNamespace {
		return key, "is in another namespace, and with the route's references not all resolved its ReferenceGrant cannot be vouched for"
	}
	if ap := svc.Spec.Ports[i].AppProtocol; kind == "HTTPRoute" && ap != nil && !strings.EqualFold(*ap, "http") {
		return key, fmt.Sprintf("has appProtocol %s, and with the route's references not all resolved it cannot be vouched for", *ap)
	}
	return key, ""
}

// untranslatedField names a field of rule that an http-route entry has no place for,
// "" when none is set. The status pipeline refuses such rules while
// consullimits says Consul cannot express them; a rule that reaches the translation
// anyway is left out, never written without the field.
func untranslatedField(rule gatewayv1.HTTPRouteRule) string {
	switch {
	case rule.Timeouts != nil:
		return "timeouts"
	case rule.Retry != nil:
		return "retry"
	case rule.SessionPersistence != nil:
		return "sessionPersistence"
	}
	return ""
}
