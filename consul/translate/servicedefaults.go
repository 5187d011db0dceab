package translate

import (
	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// serviceDefaults is the service-defaults entry that declares a backend Service of an
// http-route as http: Consul 1.15 refuses an http-route to a service of any other
// protocol ("route protocol does not match targeted service protocol"). Only Services
// present in the snapshot become backends.
func serviceDefaults(key cache.ObjectName, svc *corev1.Service, n Naming, o Ownership) *consulapi.ServiceConfigEntry {
	return &consulapi.ServiceConfigEntry{
		Kind:      consulapi.ServiceDefaults,
		Name:      n.ServiceName(key.Name),
		Namespace: n.Namespace(key.Namespace),
		Partition: n.Partition,
		Protocol:  "http",
		Meta:      o.Meta(ownerOf("Service", svc)),
	}
}
