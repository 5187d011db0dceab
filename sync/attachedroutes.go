package sync

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// attachedRoutes counts, per listener of gw, the routes accepted on gw that attach to
// it. It decides from the routes' specs, never from their status, so a Gateway's and
// its routes' status cannot chase each other.
func (d *decider) attachedRoutes(gw *gatewayv1.Gateway, v gatewayVerdict) (map[gatewayv1.SectionName]int32, error) {
	return d.countAttached(informers.RouteParentGatewayIndex, cache.MetaObjectToName(gw).String(), v, func(ref gatewayv1.ParentReference, routeNamespace string) bool {
		return refersTo(ref, routeNamespace, gw)
	}, parentTarget{gw: gw})
}

// countAttached counts, per listener of target, the routes found under value in the
// route index that are accepted on target through a parentRef refers says names it.
func (d *decider) countAttached(index, value string, v gatewayVerdict, refers func(ref gatewayv1.ParentReference, routeNamespace string) bool, target parentTarget) (map[gatewayv1.SectionName]int32, error) {
	attached := map[gatewayv1.SectionName]sets.Set[string]{}
	for _, kind := range sortedKinds(d.routeIndexers) {
		objs, err := d.routeIndexers[kind].ByIndex(index, value)
		if err != nil {
			return nil, fmt.Errorf("list %s of parent %s: %w", kind, value, err)
		}
		for _, obj := range objs {
			route, rules, err := d.viewRoute(obj)
			if err != nil {
				return nil, err
			}
			if rules.refused() {
				continue
			}
			for _, ref := range route.parentRefs {
				if !refers(ref, route.namespace) {
					continue
				}
				b, err := d.bindParent(route, ref, target, v)
				if err != nil {
					return nil, err
				}
				if !b.accepted {
					continue
				}
				for _, l := range b.listeners {
					if attached[l] == nil {
						attached[l] = sets.New[string]()
					}
					attached[l].Insert(string(kind) + "/" + route.namespace + "/" + route.name)
				}
			}
		}
	}
	counts := make(map[gatewayv1.SectionName]int32, len(attached))
	for l, routes := range attached {
		counts[l] = int32(routes.Len())
	}
	return counts, nil
}

// refersTo reports whether ref names gw.
func refersTo(ref gatewayv1.ParentReference, routeNamespace string, gw *gatewayv1.Gateway) bool {
	return gatewayapi.IsGateway(ref) && gatewayapi.Referent(routeNamespace, ref.Namespace, ref.Name) == cache.MetaObjectToName(gw)
}

func sortedKinds(m map[gatewayv1.Kind]cache.Indexer) []gatewayv1.Kind {
	kinds := make([]gatewayv1.Kind, 0, len(m))
	for k := range m {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i] < kinds[j] })
	return kinds
}
