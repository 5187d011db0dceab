package gatewayapi

import (
	"cmp"

	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// ListenerSetKind is the kind of a ListenerSet, as routes name it in a parentRef.
const ListenerSetKind = "ListenerSet"

// IsListenerSet reports whether a parentRef names a ListenerSet. Its kind must be
// given (the default parent kind is Gateway); its group defaults to the Gateway API's.
func IsListenerSet(ref gatewayv1.ParentReference) bool {
	return ref.Kind != nil && RefersTo(ref.Group, ref.Kind, gatewayv1.GroupName, ListenerSetKind)
}

// ListenerSetParent is the Gateway a ListenerSet names in spec.parentRef; ok is false
// when the reference is not to a Gateway.
func ListenerSetParent(set *gatewayv1.ListenerSet) (cache.ObjectName, bool) {
	ref := set.Spec.ParentRef
	if !RefersTo(ref.Group, ref.Kind, gatewayv1.GroupName, GatewayKind) {
		return cache.ObjectName{}, false
	}
	return Referent(set.Namespace, ref.Namespace, ref.Name), true
}

// ListenerSetListenerName is the name a listener of a ListenerSet has among the
// listeners of its parent Gateway's api-gateway entry, which must be unique there.
// Namespaces, names and section names all match Consul's listener name pattern (DNS
// labels joined by dots), so the dotted join does too; status and the Consul
// translation both name the listener so.
func ListenerSetListenerName(set cache.ObjectName, section gatewayv1.SectionName) gatewayv1.SectionName {
	return gatewayv1.SectionName(set.Namespace + "." + set.Name + "." + string(section))
}

// CertificateSecretsOf returns the Secrets the listeners name as certificates, each once;
// references without a namespace are in namespace.
func CertificateSecretsOf(namespace string, listeners []gatewayv1.ListenerEntry) []cache.ObjectName {
	tls := make([]*gatewayv1.ListenerTLSConfig, len(listeners))
	for i, l := range listeners {
		tls[i] = l.TLS
	}
	return certificateSecrets(namespace, tls)
}

// CompareListenerSets orders ListenerSets as the spec merges their listeners into
// their Gateway's (after the Gateway's own): oldest first, then by "namespace/name".
// The status decisions and the Consul translation both merge in this order.
func CompareListenerSets(a, b *gatewayv1.ListenerSet) int {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		if a.CreationTimestamp.Before(&b.CreationTimestamp) {
			return -1
		}
		return 1
	}
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}
