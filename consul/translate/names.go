package translate

import (
	"fmt"
	"strings"
)

// Naming maps Kubernetes objects to Consul entry names and places.
//
// Entry names: an object namespace/name becomes "<Prefix><name>.<namespace>". A
// Kubernetes namespace never contains a dot, so the last dot splits any entry name back
// into exactly one name and namespace: two objects never share an entry name within a
// kind. Different kinds map to different Consul kinds, or carry a kind infix (see
// CertificateName).
//
// Backend Services: a Service namespace/name is the Consul service "<name>", the name
// consul-k8s registers mesh services under; with Enterprise namespaces it is placed by
// the same rules as entries.
type Naming struct {
	// Prefix is put before every entry name, so several clusters can share one Consul.
	Prefix string
	// Partition is the Consul Enterprise admin partition of every entry; "" for CE.
	Partition string
	// DestinationNamespace puts every entry into this Consul Enterprise namespace.
	DestinationNamespace string
	// MirrorNamespaces puts each entry into the Consul namespace named like its
	// Kubernetes namespace, with MirrorPrefix before it. It wins over
	// DestinationNamespace.
	MirrorNamespaces bool
	MirrorPrefix     string
}

// EntryName is the Consul name of the entry written for a namespaced object.
func (n Naming) EntryName(namespace, name string) string {
	return n.Prefix + name + "." + namespace
}

// CertificateName is the Consul name of the certificate entry for a Secret.
// Certificates are a Consul kind of their own, so EntryName's injectivity carries over
// to them; the infix only makes them easy to tell apart in listings.
func (n Naming) CertificateName(namespace, name string) string {
	return n.Prefix + "secret." + name + "." + namespace
}

// SplitEntryName is the inverse of EntryName: ok is false for names that EntryName
// cannot have produced.
func (n Naming) SplitEntryName(entryName string) (namespace, name string, ok bool) {
	rest, found := strings.CutPrefix(entryName, n.Prefix)
	if !found {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '.')
	if i <= 0 || i == len(rest)-1 {
		return "", "", false
	}
	return rest[i+1:], rest[:i], true
}

// Namespace is the Consul Enterprise namespace for objects of a Kubernetes namespace;
// "" (the default namespace) on Consul CE.
func (n Naming) Namespace(kubeNamespace string) string {
	if n.MirrorNamespaces {
		return n.MirrorPrefix + kubeNamespace
	}
	return n.DestinationNamespace
}

// ServiceName is the Consul service of a Kubernetes Service backend.
func (n Naming) ServiceName(name string) string { return name }

// KubeNamespaceMeta is the service meta key under which consul-k8s's endpoints
// controller records the Kubernetes namespace of each instance it registers.
const KubeNamespaceMeta = "k8s-namespace"

// NarrowedServiceName is the Consul service a route sends traffic to when it may reach
// only the instances of kubeNamespace of the Consul service consulName (see
// narrowed.go). A Kubernetes namespace has no underscore, so the first one after the
// fixed part ends it: two pairs never share a name, and as a Kubernetes Service name
// has no underscore, consul-k8s registers nothing under it from a Service.
func (n Naming) NarrowedServiceName(kubeNamespace, consulName string) string {
	return n.Prefix + "consul_gateway_controller_" + kubeNamespace + "_" + consulName
}

// KubeNamespaceFilter is the Consul filter expression that selects the instances
// registered from pods of kubeNamespace.
func KubeNamespaceFilter(kubeNamespace string) string {
	return fmt.Sprintf("Service.Meta[%q] == %q", KubeNamespaceMeta, kubeNamespace)
}
