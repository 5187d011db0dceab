package translate

import (
	consulapi "github.com/hashicorp/consul/api"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/directive"
)

// The blackhole is where an http-route sends the requests Gateway API answers with an
// error: those of a rule the status pipeline refused (an unsupported filter, timeouts,
// ...), of a rule without a backend that can receive them, and the share of a rule's
// traffic that its unresolved backendRefs would have received. Consul 1.15's
// http-route cannot answer a request itself, and leaving such a rule out would let
// its requests fall through to a broader rule and reach a backend the route never
// named (an /admin rule with an auth filter served by the / rule's backend). So the
// rule keeps its matches and forwards to a Consul service that no instance serves:
// Envoy gets a cluster without endpoints and answers 503 ("no healthy upstream").
//
// With a responder (Options.Responder), the responder is the blackhole: the rule
// forwards to it with a directive to answer 500, the answer Gateway API gives. It is
// a service of its own, in no cluster with a route's backends, so a responder that
// fails fails those answers only. RequestRedirect rules, which Consul's http-route
// cannot express either, go to it with their redirect as the directive.
//
// The name has underscores, which a Kubernetes Service name cannot have, so neither
// consul-k8s nor its catalog sync registers an instance under it from a Service; it
// carries the entry prefix, so clusters sharing a Consul do not share it.
const blackholeServiceName = "consul_gateway_controller_blackhole"

// blackholeOwnerKind is the owner kind recorded on the blackhole's service-defaults: no
// Kubernetes object owns it, so it is reported on none.
const blackholeOwnerKind = "Blackhole"

// BlackholeService is the Consul service name of the blackhole.
func (n Naming) BlackholeService() string { return n.Prefix + blackholeServiceName }

// isBlackhole reports whether a route service is the blackhole or the responder: the
// services no Kubernetes object declares, whose service-defaults the translation
// writes.
func (n Naming) isBlackhole(name string, opts Options) bool {
	return name == n.BlackholeService() || (opts.Responder.Name != "" && name == opts.Responder.Name)
}

// blackhole is the blackhole service in the Consul namespace of routes of a Kubernetes
// namespace, receiving weight of a rule's traffic: the responder answering 500 when
// there is one.
func (t *pass) blackhole(routeNamespace string, weight int) consulapi.HTTPService {
	if t.opts.Responder.Name != "" {
		return t.responder(weight, directive.Directive{})
	}
	return consulapi.HTTPService{
		Name:      t.naming.BlackholeService(),
		Namespace: t.naming.Namespace(routeNamespace),
		Partition: t.naming.Partition,
		Weight:    weight,
	}
}

// errorStatus is the status the requests sent to the blackhole are answered with.
func (t *pass) errorStatus() int {
	if t.opts.Responder.Name != "" {
		return 500
	}
	return 503
}

// responder is the responder service receiving weight of a rule's traffic, with
// directive d. The directive's header is set, not added, so a client's own value
// never reaches the responder.
func (t *pass) responder(weight int, d directive.Directive) consulapi.HTTPService {
	return consulapi.HTTPService{
		Name:      t.opts.Responder.Name,
		Namespace: t.opts.Responder.Namespace,
		Partition: t.naming.Partition,
		Weight:    weight,
		Filters: consulapi.HTTPFilters{Headers: []consulapi.HTTPHeaderFilter{{
			Set: map[string]string{directive.Header: consullimits.EscapeHeaderValue(directive.Encode(d))},
		}}},
	}
}

// redirectDirective is the directive of a RequestRedirect filter on a rule with
// matches: a ReplacePrefixMatch replaces the rule's one PathPrefix match (the status
// pipeline refuses it otherwise; no match is the CRD's default, prefix "/").
func redirectDirective(r *gatewayv1.HTTPRequestRedirectFilter, matches []gatewayv1.HTTPRouteMatch) directive.Directive {
	out := &directive.Redirect{}
	if r.Scheme != nil {
		out.Scheme = *r.Scheme
	}
	if r.Hostname != nil {
		out.Hostname = string(*r.Hostname)
	}
	if r.Port != nil {
		out.Port = int(*r.Port)
	}
	if r.StatusCode != nil {
		out.StatusCode = *r.StatusCode
	}
	if p := r.Path; p != nil {
		switch p.Type {
		case gatewayv1.FullPathHTTPPathModifier:
			out.Path = &directive.PathModifier{Type: directive.ReplaceFullPath, Value: deref(p.ReplaceFullPath)}
		case gatewayv1.PrefixMatchHTTPPathModifier:
			out.Path = &directive.PathModifier{Type: directive.ReplacePrefixMatch, Value: deref(p.ReplacePrefixMatch), Prefix: matchedPrefix(matches)}
		}
	}
	return directive.Directive{Redirect: out}
}

// matchedPrefix is the value of a rule's one PathPrefix match: "/" without a match
// or a value.
func matchedPrefix(matches []gatewayv1.HTTPRouteMatch) string {
	if len(matches) == 0 || matches[0].Path == nil || matches[0].Path.Value == nil {
		return "/"
	}
	return *matches[0].Path.Value
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// blackholeDefaults is the service-defaults that declares the blackhole (or the
// responder) http: Consul 1.15 refuses an http-route to a service of any other
// protocol (InvalidDiscoveryChain), and nothing else declares them. It is written whether or not the
// controller manages its backends' service-defaults.
func blackholeDefaults(s consulService, n Naming, o Ownership) *consulapi.ServiceConfigEntry {
	return &consulapi.ServiceConfigEntry{
		Kind:      consulapi.ServiceDefaults,
		Name:      s.name,
		Namespace: s.namespace,
		Partition: s.partition,
		Protocol:  "http",
		Meta:      o.Meta(Owner{Kind: blackholeOwnerKind, Name: s.name}),
	}
}
