package gatewayapi

import (
	"slices"

	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The defaults the Gateway API gives a reference whose group or kind is unset.
const (
	CoreGroup   = ""
	GatewayKind = "Gateway"
	ServiceKind = "Service"
	SecretKind  = "Secret"
)

// MeshService is consul-k8s's backend kind for a Consul service by its Consul name
// (group consul.hashicorp.com, version v1alpha1, spec.name and spec.peer).
const (
	MeshServiceGroup    = "consul.hashicorp.com"
	MeshServiceKind     = "MeshService"
	MeshServiceVersion  = "v1alpha1"
	MeshServiceResource = "meshservices"
)

// IsMeshService reports whether a backendRef names a MeshService. Its group must be
// given: an unset group is the core group, which has no MeshService.
func IsMeshService(ref gatewayv1.BackendObjectReference) bool {
	return ref.Group != nil && string(*ref.Group) == MeshServiceGroup && ref.Kind != nil && string(*ref.Kind) == MeshServiceKind
}

// Referent is the object a reference names: name in namespace, or in defaultNamespace
// (the referring object's) when namespace is unset or empty. Every reference the
// controller follows is resolved here, so an empty namespace means the same to the
// index, the status decision and the Consul translation.
func Referent(defaultNamespace string, namespace *gatewayv1.Namespace, name gatewayv1.ObjectName) cache.ObjectName {
	if namespace != nil && *namespace != "" {
		return cache.ObjectName{Namespace: string(*namespace), Name: string(name)}
	}
	return cache.ObjectName{Namespace: defaultNamespace, Name: string(name)}
}

// RefersTo reports whether a reference's group and kind, where unset taking the
// defaults given, are group and kind.
func RefersTo(refGroup *gatewayv1.Group, refKind *gatewayv1.Kind, group, kind string) bool {
	if refGroup != nil && string(*refGroup) != group {
		return false
	}
	return refKind == nil || string(*refKind) == kind
}

// IsGateway reports whether a parentRef names a Gateway (the default parent kind).
func IsGateway(ref gatewayv1.ParentReference) bool {
	return RefersTo(ref.Group, ref.Kind, gatewayv1.GroupName, GatewayKind)
}

// nameSet collects referenced names in order, each once: a route may name one Gateway
// in several parentRefs (one per sectionName), and a Service in several rules. An
// object names a handful at most, so a scan of the list beats a map: the syncer asks
// for every route's backends on every translation.
type nameSet struct {
	list []cache.ObjectName
}

func (s *nameSet) add(name cache.ObjectName) {
	if !slices.Contains(s.list, name) {
		s.list = append(s.list, name)
	}
}

// CertificateSecrets returns the Secrets the gateway's listeners name as certificates,
// each once.
func CertificateSecrets(gateway *gatewayv1.Gateway) []cache.ObjectName {
	tls := make([]*gatewayv1.ListenerTLSConfig, len(gateway.Spec.Listeners))
	for i, l := range gateway.Spec.Listeners {
		tls[i] = l.TLS
	}
	return certificateSecrets(gateway.Namespace, tls)
}

// certificateSecrets returns the Secrets the TLS configs name as certificates, each
// once; references without a namespace are in namespace.
func certificateSecrets(namespace string, configs []*gatewayv1.ListenerTLSConfig) []cache.ObjectName {
	var names nameSet
	for _, tls := range configs {
		if tls == nil {
			continue
		}
		for _, ref := range tls.CertificateRefs {
			if RefersTo(ref.Group, ref.Kind, CoreGroup, SecretKind) {
				names.add(Referent(namespace, ref.Namespace, ref.Name))
			}
		}
	}
	return names.list
}
