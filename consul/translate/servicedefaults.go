package translate

import (
	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
)

// backendDefaults writes the service-defaults of backend b, whose Service the routes
// that use it found.
func (t *pass) backendDefaults(b backend) {
	if svc := t.service(b.Service); svc != nil {
		t.put(serviceDefaults(b, svc, t.naming, t.owner))
	}
}

// serviceDefaults is the service-defaults entry that declares a backend Service of an
// http-route as http: Consul 1.15 refuses an http-route to a service of any other
// protocol ("route protocol does not match targeted service protocol"). Only Services
// present in the snapshot become backends.
func serviceDefaults(b backend, svc *corev1.Service, n Naming, o Ownership) *consulapi.ServiceConfigEntry {
	return &consulapi.ServiceConfigEntry{
		Kind:      consulapi.ServiceDefaults,
		Name:      n.ServiceName(b.Consul),
		Namespace: n.Namespace(b.Service.Namespace),
		Partition: n.Partition,
		Protocol:  "http",
		Meta:      o.Meta(ownerOf("Service", svc)),
	}
}
