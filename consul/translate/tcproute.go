package translate

import (
	"fmt"
	"slices"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	gwdecision "github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

// tcpRoute writes the tcp-route entry of a route that is served somewhere, and
// reports the parent listeners it is left out of (see parentProblems). Consul's
// tcp-route forwards to at most one service (Consul 1.15.4 agent/structs/config_entry_routes.go:539), and TCPRoute
// has one rule; the status pipeline refuses rules that would send traffic to more than
// one backend.
func (t *pass) tcpRoute(key cache.ObjectName, c ConfirmedRoute) {
	r, ok := c.Route.(*gatewayv1.TCPRoute)
	if !ok || r == nil {
		return
	}
	parents, dropped := t.routeParents("TCPRoute", key, c.Decision.Attachments, "tcp")
	written := len(parents) > 0 && t.tcpEntry(key, r, c.Decision, parents)
	t.parentProblems("TCPRoute", key, dropped, written)
}

// tcpEntry writes the tcp-route entry of route r for parents, and reports whether it
// did.
func (t *pass) tcpEntry(key cache.ObjectName, r *gatewayv1.TCPRoute, decision gwdecision.Route, parents []parentListener) bool {
	var services []consulapi.TCPService
	var used []backend
	for i, rule := range r.Spec.Rules {
		if slices.Contains(decision.DroppedRules, i) {
			continue
		}
		service, b, problem := t.tcpRule(r.Namespace, i, rule, decision)
		if problem != "" {
			t.problem("TCPRoute", key, "%s", problem)
			continue
		}
		services = append(services, service)
		used = append(used, b)
	}
	// Without a service there is nothing to forward to: Gateway API refuses the
	// connections, and Consul gets no route that could accept them.
	if len(services) == 0 {
		return false
	}
	if len(services) > 1 {
		t.problem("TCPRoute", key, "%d rules have a backend, but Consul's tcp-route forwards to a single service; the route is left out of Consul", len(services))
		return false
	}
	// The service-defaults written for http-route backends make the service http, and
	// Consul 1.15 refuses a tcp-route to an http service ("route protocol does not match
	// targeted service protocol"). The http-routes keep it; this route cannot have it.
	if svc := services[0]; (t.opts.ManageServiceDefaults || used[0].Narrowed) && t.read(readHTTPService, consulService{svc.Name, svc.Namespace, svc.Partition}).(bool) {
		t.problem("TCPRoute", key, "Consul service %s is also an HTTPRoute backend, so its service-defaults declare protocol http, and Consul's tcp-route cannot forward to an http service; the route is left out of Consul", svc.Name)
		return false
	}
	t.put(&consulapi.TCPRouteConfigEntry{
		Kind:      consulapi.TCPRoute,
		Name:      t.naming.EntryName(r.Namespace, r.Name),
		Namespace: t.naming.Namespace(r.Namespace),
		Partition: t.naming.Partition,
		Parents:   parentRefs(parents),
		Services:  services,
		Meta:      t.owner.Meta(ownerOf("TCPRoute", r)),
	})
	// Only a narrowed backend has entries of its own for a tcp-route (narrowed.go):
	// the service-defaults of the others declare http.
	if used[0].Narrowed {
		t.out.backends = append(t.out.backends, used[0])
	}
	return true
}

// tcpRule returns the one service a TCP rule forwards to, or why it has none.
// backendRefs with weight 0 receive no connections and are not counted.
func (t *pass) tcpRule(routeNamespace string, index int, rule gatewayv1.TCPRouteRule, decision gwdecision.Route) (consulapi.TCPService, backend, string) {
	var refs []gatewayv1.BackendRef
	var indexes []gwdecision.BackendRefIndex
	for b, ref := range rule.BackendRefs {
		if backendWeight(ref.Weight) > 0 {
			refs = append(refs, ref)
			indexes = append(indexes, gwdecision.BackendRefIndex{Rule: index, Ref: b})
		}
	}
	switch len(refs) {
	case 0:
		return consulapi.TCPService{}, backend{}, fmt.Sprintf("rule %d: no backendRef has a weight above 0; the rule is left out of Consul", index)
	case 1:
	default:
		return consulapi.TCPService{}, backend{}, fmt.Sprintf("rule %d: %d backends would receive connections, but Consul's tcp-route forwards to a single service; the rule is left out of Consul", index, len(refs))
	}
	b, ok := resolvedBackend(decision, indexes[0])
	if !ok {
		key := gatewayapi.Referent(routeNamespace, refs[0].Namespace, refs[0].Name)
		return consulapi.TCPService{}, backend{}, fmt.Sprintf("rule %d: backendRef %s did not resolve (see the route's ResolvedRefs condition); the rule is left out of Consul", index, key)
	}
	return consulapi.TCPService{Name: b.consulName(t.naming), Namespace: t.naming.Namespace(b.Service.Namespace), Partition: t.naming.Partition}, b, ""
}
