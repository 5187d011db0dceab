package sync

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// RouteExplanation is the status workers' decision on a route's hostnames, rules and
// backends, which holds for every parent alike, spelled out rule by rule and
// backendRef by backendRef (the status names only the first problem of each kind).
type RouteExplanation struct {
	// HostnameProblem says why the route's hostnames refuse it on every parent.
	HostnameProblem string
	Rules           []RuleExplanation
}

// RuleExplanation is the decision on one rule.
type RuleExplanation struct {
	// Problem says why Consul cannot program the rule, which is then dropped (its
	// requests answered by the blackhole, for an HTTPRoute); empty when it can.
	Problem  string
	Backends []BackendExplanation
}

// BackendExplanation is the decision on one backendRef.
type BackendExplanation struct {
	Ref gatewayv1.BackendObjectReference
	// ConsulService is the Consul service the backendRef resolves to (before any
	// prefix or namespace placement); empty when it does not resolve.
	ConsulService string
	// OnlyNamespace: pods of other namespaces register the Consul service too, and
	// the backendRef reaches only the instances of its referent's namespace.
	OnlyNamespace bool
	// Problem says why it does not resolve.
	Problem string
}

// ExplainRoute decides on route as the status workers do, with objects as their
// caches (Services, ReferenceGrants, Namespaces, injected pods; anything Offline
// reads), and spells the decision out.
func ExplainRoute(cfg OfflineConfig, route runtime.Object, objects []runtime.Object) (RouteExplanation, error) {
	o, err := newOffline(cfg, append([]runtime.Object{route}, objects...))
	if err != nil {
		return RouteExplanation{}, err
	}
	_, rules, err := o.viewRoute(route)
	if err != nil {
		return RouteExplanation{}, err
	}
	kind, _ := gatewayapi.RouteOf(route)
	spec, err := kind.Spec(route)
	if err != nil {
		return RouteExplanation{}, err
	}
	out := RouteExplanation{HostnameProblem: rules.hostnameProblem}
	ns := route.(interface{ GetNamespace() string }).GetNamespace()
	for r, refs := range spec.BackendRefs {
		rule := RuleExplanation{}
		if p := rules.problems[r]; p != nil {
			rule.Problem = p.Message
		}
		for _, ref := range refs {
			resolved, problem, err := resolveBackendRef(kind.Kind, ns, ref, o.services, o.refs.grants, o.consulServices)
			if err != nil {
				return RouteExplanation{}, fmt.Errorf("backendRef %s: %w", ref.Name, err)
			}
			b := BackendExplanation{Ref: ref, ConsulService: resolved.Service, OnlyNamespace: resolved.Narrowed}
			if problem != nil {
				b.ConsulService, b.Problem = "", problem.Message
			}
			rule.Backends = append(rule.Backends, b)
		}
		out.Rules = append(out.Rules, rule)
	}
	return out, nil
}
