package cli

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
)

// routeExplanation is the status workers' decision on a route's hostnames, rules and
// backends, which holds for every parent alike, spelled out rule by rule and
// backendRef by backendRef (the status names only the first problem of each kind).
type routeExplanation struct {
	// HostnameProblem says why the route's hostnames refuse it on every parent.
	HostnameProblem string
	Rules           []ruleExplanation
}

// ruleExplanation is the decision on one rule.
type ruleExplanation struct {
	// Problem says why Consul cannot program the rule, which is then dropped (its
	// requests answered by the blackhole, for an HTTPRoute); empty when it can.
	Problem  string
	Backends []backendExplanation
}

// backendExplanation is the decision on one backendRef.
type backendExplanation struct {
	Ref gatewayv1.BackendObjectReference
	gwsync.ResolvedBackend
}

// decideRoute decides on route as the status workers do, with objects as their
// caches (Services, ReferenceGrants, Namespaces, injected pods; anything
// gwsync.NewOfflineDecider reads), and spells the decision out.
func decideRoute(cfg gwsync.OfflineConfig, route runtime.Object, objects []runtime.Object) (routeExplanation, error) {
	d, err := gwsync.NewOfflineDecider(cfg, append([]runtime.Object{route}, objects...))
	if err != nil {
		return routeExplanation{}, err
	}
	rulings, err := d.RouteRulings(route)
	if err != nil {
		return routeExplanation{}, err
	}
	kind, _ := gatewayapi.RouteOf(route)
	spec, err := kind.Spec(route)
	if err != nil {
		return routeExplanation{}, err
	}
	out := routeExplanation{HostnameProblem: rulings.HostnameProblem}
	ns := route.(interface{ GetNamespace() string }).GetNamespace()
	for r, refs := range spec.BackendRefs {
		rule := ruleExplanation{Problem: rulings.RuleProblems[r]}
		for _, ref := range refs {
			resolved, err := d.ResolveBackendRef(kind.Kind, ns, ref)
			if err != nil {
				return routeExplanation{}, fmt.Errorf("backendRef %s: %w", ref.Name, err)
			}
			rule.Backends = append(rule.Backends, backendExplanation{Ref: ref, ResolvedBackend: resolved})
		}
		out.Rules = append(out.Rules, rule)
	}
	return out, nil
}
