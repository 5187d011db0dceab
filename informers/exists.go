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
	case "HTTPRoute":
		store = i.HTTPRoutes.Informer().GetStore()
	case "TCPRoute":
		store = i.TCPRoutes.Informer().GetStore()
	case "GRPCRoute":
		store = i.GRPCRoutes.Informer().GetStore()
	default:
		return false
	}
	_, exists, err := store.GetByKey(key.String())
	return err == nil && exists
}
