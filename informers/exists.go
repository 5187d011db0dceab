package informers

import (
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Exists reports whether an object of a Gateway API kind is in the cache.
func (i *Informers) Exists(kind gatewayv1.Kind, key cache.ObjectName) bool {
	var store cache.Store
	switch kind {
	case "GatewayClass":
		store = i.GatewayClasses.Informer().GetStore()
	case "Gateway":
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
