package translate

import (
	"fmt"
)

// Meta keys recorded on every entry this controller writes. Consul meta keys allow
// [a-zA-Z0-9_-] and must not start with "consul-".
const (
	metaController = "gateway-controller"         // the GatewayClass controllerName
	metaCluster    = "gateway-controller-cluster" // the --cluster-id of the writer
	metaKind       = "k8s-kind"
	metaNamespace  = "k8s-namespace"
	metaName       = "k8s-name"
	metaUID        = "k8s-uid"
)

// Ownership is who writes entries: a controller name in a cluster. Entries that carry
// another controller's or cluster's meta, or none, are never changed or deleted.
type Ownership struct {
	Controller string
	ClusterID  string
}

// Meta returns the meta to record on an entry written for owner.
func (o Ownership) Meta(owner Owner) map[string]string {
	return map[string]string{
		metaController: o.Controller,
		metaCluster:    o.ClusterID,
		metaKind:       owner.Kind,
		metaNamespace:  owner.Namespace,
		metaName:       owner.Name,
		metaUID:        owner.UID,
	}
}

// Owns reports whether an entry with meta was written by this controller and cluster.
// Missing meta is never ours, whatever Ownership holds.
func (o Ownership) Owns(meta map[string]string) bool {
	controller, cluster := meta[metaController], meta[metaCluster]
	return controller != "" && cluster != "" && controller == o.Controller && cluster == o.ClusterID
}

// Validate checks that entries written with o can be told apart and stored: both names
// are set and fit Consul's meta value limit.
func (o Ownership) Validate() error {
	for name, v := range map[string]string{"controller name": o.Controller, "cluster id": o.ClusterID} {
		if v == "" {
			return fmt.Errorf("%s must not be empty", name)
		}
		if len(v) > metaValueMaxLength {
			return fmt.Errorf("%s is longer than Consul's %d-character meta value limit", name, metaValueMaxLength)
		}
	}
	return nil
}

// metaValueMaxLength is Consul's limit on a meta value.
const metaValueMaxLength = 512

// OwnerOf returns the object an owned entry was written for.
func OwnerOf(meta map[string]string) Owner {
	return Owner{Kind: meta[metaKind], Namespace: meta[metaNamespace], Name: meta[metaName], UID: meta[metaUID]}
}
