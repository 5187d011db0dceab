package translate

import (
	"cmp"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// unit is one thing the translation translates on its own, in translation order:
// Gateways first (routes bind only to the listeners that were written), then routes of
// each kind in routeTranslations' order, then the service-defaults of the backends and
// of the blackholes the written http-routes use.
type unit struct {
	kind unitKind
	// key is a Gateway's or route's, a backend's Service, or a blackhole service's
	// namespace and name; name is a backend's Consul name or a blackhole's partition.
	key      cache.ObjectName
	name     string
	mesh     bool      // a backend's MeshService
	narrowed bool      // a backend reaching only its namespace's instances
	uid      types.UID // a backend's Service's UID
}

func backendUnit(b backend) unit {
	return unit{kind: unitBackend, key: b.Service, name: b.Consul, mesh: b.MeshService, narrowed: b.Narrowed, uid: b.UID}
}

func (u unit) backend() backend {
	return backend{Service: u.key, Consul: u.name, MeshService: u.mesh, Narrowed: u.narrowed, UID: u.uid}
}

// subsetsUnit is the service-resolver of a Consul service that narrowed backends
// reach subsets of.
func subsetsUnit(s consulService) unit {
	return unit{kind: unitSubsets, key: cache.ObjectName{Namespace: s.namespace, Name: s.name}, name: s.partition}
}

func blackholeUnit(s consulService) unit {
	return unit{kind: unitBlackhole, key: cache.ObjectName{Namespace: s.namespace, Name: s.name}, name: s.partition}
}

// consulService is the Consul service of a blackhole or subsets unit.
func (u unit) consulService() consulService {
	return consulService{name: u.key.Name, namespace: u.key.Namespace, partition: u.name}
}

// subsetsSource is what a subsets unit translates: a Consul service and the
// namespaces whose subsets it has, joined.
type subsetsSource struct {
	service    consulService
	namespaces string
}

type unitKind int

const (
	unitGateway unitKind = iota
	unitHTTPRoute
	unitTCPRoute
	unitBackend
	unitBlackhole
	unitSubsets // after unitBackend, whose translations say which subsets are used
)

// compareUnits orders units as a whole translation visits them.
func compareUnits(a, b unit) int {
	return cmp.Or(cmp.Compare(a.kind, b.kind), compareObjectNames(a.key, b.key), cmp.Compare(a.name, b.name),
		compareBools(a.mesh, b.mesh), compareBools(a.narrowed, b.narrowed), cmp.Compare(a.uid, b.uid))
}

func compareBools(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
