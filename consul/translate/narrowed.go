package translate

import (
	consulapi "github.com/hashicorp/consul/api"
)

// Without namespace mirroring consul-k8s registers the pods of every Kubernetes
// Service "echo", whatever its namespace, as the one Consul service "echo", each
// instance with its namespace in the service meta KubeNamespaceMeta. A route to
// demo/echo must reach only demo's pods (a ReferenceGrant guards the others), so when
// the status pipeline finds that other namespaces register the name too it narrows
// the backend (decision.Backend.Narrowed), and the route names a service of
// ours instead (Naming.NarrowedServiceName) with:
//
//   - a service-resolver that redirects it to the subset "demo" of echo;
//   - service-defaults with the protocol of the routes that use it (Consul refuses an
//     http-route to a service that is not http, and a chain whose services disagree);
//   - the subset itself, which Consul looks up in echo's own service-resolver: one
//     resolver for echo with a subset per narrowed namespace, filtered on the meta.
//
// So the subset holds only the instances Consul has, whatever Kubernetes Services
// exist, and Consul's xDS gives the gateway only them (test/xds
// TestSubsetRedirectServesOneNamespace). A subset without filter-matching instances
// is empty: the route's requests get 503, never another namespace's pods. Echo's
// resolver is written only while it is ours: a user's own one for that name is left
// alone, and Consul then refuses the redirect unless the user adds the subset (the
// syncer says so in the route's status). Echo's protocol stays its owner's.

// subsetUse is a narrowed backend's use of the subset of a Consul service holding
// the instances of one Kubernetes namespace.
type subsetUse struct {
	service       consulService
	kubeNamespace string
}

// narrowedOwnerKind is the owner kind recorded on the service-resolver that holds a
// Consul service's namespace subsets: it serves the backends of several namespaces,
// and is reported on no object.
const narrowedOwnerKind = "SharedConsulService"

// narrowedBackend writes the entries of the service of ours that a narrowed backend's
// routes name, and records the subset it redirects to.
func (t *pass) narrowedBackend(b backend) {
	name := b.consulName(t.naming)
	namespace := t.naming.Namespace(b.Service.Namespace)
	protocol := "tcp"
	if t.read(readHTTPService, consulService{name, namespace, t.naming.Partition}).(bool) {
		protocol = "http"
	}
	owner := t.owner.Meta(b.owner())
	t.put(&consulapi.ServiceResolverConfigEntry{
		Kind:      consulapi.ServiceResolver,
		Name:      name,
		Namespace: namespace,
		Partition: t.naming.Partition,
		Redirect: &consulapi.ServiceResolverRedirect{
			Service:       t.naming.ServiceName(b.Consul),
			ServiceSubset: b.Service.Namespace,
			Namespace:     namespace,
			Partition:     t.naming.Partition,
		},
		Meta: owner,
	})
	t.put(&consulapi.ServiceConfigEntry{
		Kind:      consulapi.ServiceDefaults,
		Name:      name,
		Namespace: namespace,
		Partition: t.naming.Partition,
		Protocol:  protocol,
		Meta:      owner,
	})
	t.current().subsets = append(t.current().subsets, subsetUse{
		service:       consulService{t.naming.ServiceName(b.Consul), namespace, t.naming.Partition},
		kubeNamespace: b.Service.Namespace,
	})
}

// subsetsResolver is the service-resolver of Consul service s with a subset per
// Kubernetes namespace of namespaces, each named after its namespace (a Kubernetes
// namespace is a DNS label, as Consul wants subset names to be).
func subsetsResolver(s consulService, namespaces map[string]int, n Naming, o Ownership) *consulapi.ServiceResolverConfigEntry {
	subsets := make(map[string]consulapi.ServiceResolverSubset, len(namespaces))
	for ns := range namespaces {
		subsets[ns] = consulapi.ServiceResolverSubset{Filter: KubeNamespaceFilter(ns)}
	}
	return &consulapi.ServiceResolverConfigEntry{
		Kind:      consulapi.ServiceResolver,
		Name:      s.name,
		Namespace: s.namespace,
		Partition: s.partition,
		Subsets:   subsets,
		Meta:      o.Meta(Owner{Kind: narrowedOwnerKind, Name: s.name}),
	}
}
