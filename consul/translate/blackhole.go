package translate

import (
	consulapi "github.com/hashicorp/consul/api"
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
// The name has underscores, which a Kubernetes Service name cannot have, so neither
// consul-k8s nor its catalog sync registers an instance under it from a Service; it
// carries the entry prefix, so clusters sharing a Consul do not share it.
const blackholeServiceName = "consul_gateway_controller_blackhole"

// blackholeOwnerKind is the owner kind recorded on the blackhole's service-defaults: no
// Kubernetes object owns it, so it is reported on none.
const blackholeOwnerKind = "Blackhole"

// BlackholeService is the Consul service name of the blackhole.
func (n Naming) BlackholeService() string { return n.Prefix + blackholeServiceName }

// blackhole is the blackhole service in the Consul namespace of routes of a Kubernetes
// namespace, receiving weight of a rule's traffic.
func (t *pass) blackhole(routeNamespace string, weight int) consulapi.HTTPService {
	return consulapi.HTTPService{
		Name:      t.naming.BlackholeService(),
		Namespace: t.naming.Namespace(routeNamespace),
		Partition: t.naming.Partition,
		Weight:    weight,
	}
}

// blackholeDefaults is the service-defaults that declares the blackhole http: Consul
// 1.15 refuses an http-route to a service of any other protocol (InvalidDiscoveryChain),
// and nothing else declares the blackhole. It is written whether or not the
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
