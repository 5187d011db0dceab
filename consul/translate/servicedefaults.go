package translate

import (
	consulapi "github.com/hashicorp/consul/api"
)

// backendDefaults writes the service-defaults of backend b: it declares the Consul
// service of a backend Service of an http-route as http, as Consul 1.15 refuses an
// http-route to a service of any other protocol ("route protocol does not match
// targeted service protocol"). The Service is its owner.
func (t *pass) backendDefaults(b backend) {
	t.put(&consulapi.ServiceConfigEntry{
		Kind:      consulapi.ServiceDefaults,
		Name:      t.naming.ServiceName(b.Consul),
		Namespace: t.naming.Namespace(b.Service.Namespace),
		Partition: t.naming.Partition,
		Protocol:  "http",
		Meta:      t.owner.Meta(b.owner()),
	})
}
