// Package catalog registers each Gateway's pods in Consul's catalog: Consul serves xDS
// only to a proxy its catalog knows. Each gateway pod with a node and an IP is an
// instance of the service named like the Gateway's api-gateway entry, with the pod's
// name and namespace as its ID, on the synthetic node "gateway-<node>" (the node
// consul-dataplane names with -service-node-name), and a check that passes only while
// the pod is Ready. Instances of ours that match no pod, or sit on a node named
// otherwise, are deregistered.
//
// Registrar is a controller of its own: a queue of Gateway keys, fed by the gateway
// pods' cache, by confirmed Gateways and by a blocking query on the catalog.
package catalog
