package informers

import (
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// Exists reports whether an object of a Gateway API kind is in the cache.
func (i *Informers) Exists(kind gatewayv1.Kind, key cache.ObjectName) bool {
	var store cache.Store
	switch kind {
	case gatewayapi.GatewayClassKind:
		store = i.GatewayClasses.Informer().GetStore()
	case gatewayapi.GatewayKind:
		store = i.Gateways.Informer().GetStore()
	default:
		informer, ok := i.Routes[kind]
		if !ok {
			return false
		}
		store = informer.GetStore()
	}
	_, exists, err := store.GetByKey(key.String())
	return err == nil && exists
}
