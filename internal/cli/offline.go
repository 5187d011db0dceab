package cli

import (
	"fmt"
	"slices"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

// maxOfflinePasses bounds the judging rounds: a status feeds others (a Gateway's
// Accepted its routes', the routes' attachment the Gateway's attachedRoutes), and a
// cluster of objects settles in three; more means the decisions do not converge, a
// bug worth an error rather than a loop.
const maxOfflinePasses = 8

// judgeOffline judges objects as the status workers judge them from their caches,
// without an API server: each status the workers would write is stored as if the
// server had confirmed it, and every object is judged again until nothing changes.
// The decisions are the workers' own (gwsync.OfflineDecider); it returns what the
// workers would publish once every status is confirmed.
func judgeOffline(cfg gwsync.OfflineConfig, objects []runtime.Object) ([]contract.Confirmation, error) {
	d, err := gwsync.NewOfflineDecider(cfg, objects)
	if err != nil {
		return nil, err
	}
	j := offlineJudging{d: d, decisions: map[routeKey]decision.Route{}}
	for range maxOfflinePasses {
		changed, err := j.pass()
		if err != nil {
			return nil, err
		}
		if !changed {
			return j.confirmations(), nil
		}
	}
	return nil, fmt.Errorf("the statuses did not settle in %d rounds of judging", maxOfflinePasses)
}

// routeKey names one route of one kind.
type routeKey struct {
	kind gatewayv1.Kind
	key  cache.ObjectName
}

// offlineJudging is one run of judgeOffline: the decider and the last decision on
// each route of ours.
type offlineJudging struct {
	d         *gwsync.OfflineDecider
	decisions map[routeKey]decision.Route
}

// pass judges every object once, in the workers' order of dependence, storing each
// changed status; it reports whether any changed.
func (j *offlineJudging) pass() (bool, error) {
	changed := false
	for _, judge := range []func() (bool, error){j.judgeClasses, j.judgeGateways, j.judgeListenerSets} {
		c, err := judge()
		if err != nil {
			return false, err
		}
		changed = changed || c
	}
	for _, kind := range gatewayapi.Routes {
		c, err := j.judgeRoutes(kind)
		if err != nil {
			return false, err
		}
		changed = changed || c
	}
	return changed, nil
}

func (j *offlineJudging) judgeClasses() (bool, error) {
	changed := false
	for _, class := range j.d.GatewayClasses() {
		if class.Spec.ControllerName != j.d.ControllerName() {
			continue
		}
		status, err := j.d.GatewayClassStatus(class)
		if err != nil {
			return false, err
		}
		c, err := store(j, class, apiequality.Semantic.DeepEqual(status, class.Status), func(u *gatewayv1.GatewayClass) { u.Status = status })
		if err != nil {
			return false, err
		}
		changed = changed || c
	}
	return changed, nil
}

func (j *offlineJudging) judgeGateways() (bool, error) {
	changed := false
	for _, gw := range j.d.Gateways() {
		class, ours, err := j.d.OurClass(gw.Spec.GatewayClassName)
		if err != nil {
			return false, err
		}
		if !ours {
			continue
		}
		status, err := j.d.GatewayStatus(gw, class)
		if err != nil {
			return false, fmt.Errorf("judge Gateway %s/%s: %w", gw.Namespace, gw.Name, err)
		}
		c, err := store(j, gw, apiequality.Semantic.DeepEqual(status, gw.Status), func(u *gatewayv1.Gateway) { u.Status = status })
		if err != nil {
			return false, err
		}
		changed = changed || c
	}
	return changed, nil
}

func (j *offlineJudging) judgeListenerSets() (bool, error) {
	changed := false
	for _, set := range j.d.ListenerSets() {
		gw, class, ours, err := j.d.ParentGatewayOf(set)
		if err != nil {
			return false, err
		}
		if !ours {
			continue
		}
		status, err := j.d.ListenerSetStatus(set, gw, class)
		if err != nil {
			return false, fmt.Errorf("judge ListenerSet %s/%s: %w", set.Namespace, set.Name, err)
		}
		c, err := store(j, set, apiequality.Semantic.DeepEqual(status, set.Status), func(u *gatewayv1.ListenerSet) { u.Status = status })
		if err != nil {
			return false, err
		}
		changed = changed || c
	}
	return changed, nil
}

func (j *offlineJudging) judgeRoutes(kind gatewayapi.RouteKind) (bool, error) {
	changed := false
	for _, r := range j.d.Routes(kind.Kind) {
		existing := kind.Parents(r)
		parents, decision, err := j.d.RouteStatus(r, existing)
		if err != nil {
			return false, fmt.Errorf("%s %s/%s: %w", kind.Kind, r.GetNamespace(), r.GetName(), err)
		}
		if !j.hasOurParent(parents) && !j.hasOurParent(existing) {
			continue
		}
		j.decisions[routeKey{kind.Kind, cache.MetaObjectToName(r)}] = decision
		if apiequality.Semantic.DeepEqual(parents, existing) {
			continue
		}
		update, err := kind.WithParents(r, parents)
		if err != nil {
			return false, err
		}
		if err := j.d.Store(update); err != nil {
			return false, err
		}
		changed = true
	}
	return changed, nil
}

func (j *offlineJudging) hasOurParent(parents []gatewayv1.RouteParentStatus) bool {
	return slices.ContainsFunc(parents, func(p gatewayv1.RouteParentStatus) bool { return p.ControllerName == j.d.ControllerName() })
}

// store replaces obj by a copy with its status set, unless it is unchanged, as a
// confirmed status write would; it reports whether it replaced it.
func store[T runtime.Object](j *offlineJudging, obj T, unchanged bool, set func(T)) (bool, error) {
	if unchanged {
		return false, nil
	}
	update := obj.DeepCopyObject().(T)
	set(update)
	return true, j.d.Store(update)
}

// confirmations are what the status workers would publish once every status is
// confirmed: each object of ours with its status, each route with its decision, and
// nothing for an object withheld from the syncers.
func (j *offlineJudging) confirmations() []contract.Confirmation {
	var out []contract.Confirmation
	add := func(kind gatewayv1.Kind, obj gatewayapi.Object, route *decision.Route) {
		conf := contract.Confirmation{Kind: kind, Key: cache.MetaObjectToName(obj), Object: obj, Route: route}
		if gwsync.Withheld(obj) {
			conf.Object, conf.Route = nil, nil
		}
		out = append(out, conf)
	}
	for _, class := range j.d.GatewayClasses() {
		if class.Spec.ControllerName == j.d.ControllerName() {
			add(gatewayapi.GatewayClassKind, class, nil)
		}
	}
	for _, gw := range j.d.Gateways() {
		if _, ours, _ := j.d.OurClass(gw.Spec.GatewayClassName); ours {
			add(gatewayapi.GatewayKind, gw, nil)
		}
	}
	for _, set := range j.d.ListenerSets() {
		if _, _, ours, _ := j.d.ParentGatewayOf(set); ours {
			add(gatewayapi.ListenerSetKind, set, nil)
		}
	}
	for _, kind := range gatewayapi.Routes {
		for _, r := range j.d.Routes(kind.Kind) {
			if decision, ok := j.decisions[routeKey{kind.Kind, cache.MetaObjectToName(r)}]; ok {
				add(kind.Kind, r, &decision)
			}
		}
	}
	return out
}
