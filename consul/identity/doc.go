// Package identity gives each Gateway its own identity in a Consul with ACLs on, so its
// gateway pods may act as its Consul service and nothing else. For every Gateway whose
// Accepted=True status the API server confirmed, it keeps three ACL objects:
//
//   - a policy that lets the proxy act as the Gateway's service (service write on that
//     name alone) and read what Consul 1.15 makes an api-gateway proxy read to serve its
//     routes (mesh, services and nodes);
//   - a role holding that policy;
//   - a binding rule in the Kubernetes auth method the Gateway's pods log in to, which
//     gives the role to the Gateway's own ServiceAccount in its own namespace only: the
//     one the data plane created, by its UID. While that ServiceAccount is missing, or
//     one of its name belongs to someone else, the Gateway has no identity.
//
// Policies and roles have deterministic names and every object carries this
// controller's ownership in its description: a restart writes nothing, an object of the
// same name that is not ours is never changed (the Gateway's Programmed condition says
// so), and a Gateway that goes or leaves our classes has its objects removed. Consul's
// ACL endpoints have no check-and-set, so each object is compared before it is written;
// a blocking query on each ACL list brings a hand edit back to the Gateway's worker.
// After its first answer (which compares every Gateway), a list's change brings back
// only the Gateways whose objects in it changed, and, when an object not ours changed,
// those whose identity has a problem: one Gateway's churn costs no other a sync.
//
// Manager is a controller of its own, run only by the leader, like the catalog
// registrar: a queue of Gateway keys fed by confirmed Gateways and by those queries.
package identity
