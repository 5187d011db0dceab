package sync

import (
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// listenerSetVerdict is the decision on one ListenerSet naming a Gateway of ours.
type listenerSetVerdict struct {
	set *gatewayv1.ListenerSet
	// allowed is whether the Gateway's allowedListeners admits the ListenerSet; only
	// then are its listeners merged into the Gateway's.
	allowed   bool
	accepted  bool
	reason    gatewayv1.ListenerSetConditionReason
	message   string
	listeners []listenerState
}

// listenerSet returns the verdict on the ListenerSet key among the Gateway's, nil when
// it does not name the Gateway.
func (v gatewayVerdict) listenerSet(key cache.ObjectName) *listenerSetVerdict {
	for i := range v.sets {
		if cache.MetaObjectToName(v.sets[i].set) == key {
			return &v.sets[i]
		}
	}
	return nil
}

// attachedListenerSets counts the Gateway's accepted ListenerSets.
func (v gatewayVerdict) attachedListenerSets() int32 {
	var n int32
	for _, s := range v.sets {
		if s.accepted {
			n++
		}
	}
	return n
}

// listenerSetsOf returns the ListenerSets naming gw as their parent, in the order
// their listeners take precedence: oldest first, then by "namespace/name".
func (d *decider) listenerSetsOf(gw *gatewayv1.Gateway) ([]*gatewayv1.ListenerSet, error) {
	if d.listenerSets == nil {
		return nil, nil
	}
	key := cache.MetaObjectToName(gw).String()
	objs, err := d.listenerSets.ByIndex(informers.ListenerSetParentGatewayIndex, key)
	if err != nil {
		return nil, fmt.Errorf("list ListenerSets of Gateway %s: %w", key, err)
	}
	sets := make([]*gatewayv1.ListenerSet, 0, len(objs))
	for _, obj := range objs {
		if set, ok := obj.(*gatewayv1.ListenerSet); ok {
			sets = append(sets, set)
		}
	}
	slices.SortFunc(sets, gatewayapi.CompareListenerSets)
	return sets, nil
}

// listenerSetAllowed applies the Gateway's allowedListeners.namespaces: None (the
// default), Same, All, Selector. A selector that does not parse selects nothing.
func (d *decider) listenerSetAllowed(gw *gatewayv1.Gateway, set *gatewayv1.ListenerSet) (bool, error) {
	allowed := gw.Spec.AllowedListeners
	if allowed == nil || allowed.Namespaces == nil || allowed.Namespaces.From == nil {
		return false, nil
	}
	switch *allowed.Namespaces.From {
	case gatewayv1.NamespacesFromAll:
		return true, nil
	case gatewayv1.NamespacesFromSame:
		return set.Namespace == gw.Namespace, nil
	case gatewayv1.NamespacesFromSelector:
		return d.namespaceSelected(allowed.Namespaces.Selector, set.Namespace)
	default: // None, and any value a newer API adds that we do not know
		return false, nil
	}
}

// namespaceSelected reports whether the namespace's labels match selector; a missing
// selector or one that does not parse selects nothing.
func (d *decider) namespaceSelected(selector *metav1.LabelSelector, namespace string) (bool, error) {
	if selector == nil {
		return false, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return false, nil
	}
	ns, err := d.namespaces.Get(namespace)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get Namespace %s: %w", namespace, err)
	}
	return sel.Matches(labels.Set(ns.Labels)), nil
}

// mergedListeners judges the Gateway's own listeners and those of the ListenerSets it
// allows, merged in precedence order (the Gateway's first, then ListenerSets by
// gatewayapi.CompareListenerSets), so that conflicts are found across all of them and the later
// listener loses. It returns the Gateway's own listener states and one verdict per
// ListenerSet naming the Gateway, whose acceptance finishListenerSets decides.
func (d *decider) mergedListeners(gw *gatewayv1.Gateway) ([]listenerState, []listenerSetVerdict, error) {
	merged, err := judgeListeners(gatewayOwner(gw), gw.Spec.Listeners, d.refs)
	if err != nil {
		return nil, nil, err
	}
	own := len(merged)
	sets, err := d.listenerSetsOf(gw)
	if err != nil {
		return nil, nil, err
	}
	verdicts := make([]listenerSetVerdict, len(sets))
	spans := make([][2]int, len(sets)) // each allowed ListenerSet's listeners in merged
	for i, set := range sets {
		verdicts[i].set = set
		if verdicts[i].allowed, err = d.listenerSetAllowed(gw, set); err != nil || !verdicts[i].allowed {
			if err != nil {
				return nil, nil, err
			}
			continue
		}
		states, err := judgeListeners(listenerSetOwner(set), listenerEntries(set), d.refs)
		if err != nil {
			return nil, nil, err
		}
		spans[i] = [2]int{len(merged), len(merged) + len(states)}
		merged = append(merged, states...)
	}
	markNameConflicts(merged)
	markPortConflicts(merged)
	for i := range verdicts {
		if verdicts[i].allowed {
			verdicts[i].listeners = merged[spans[i][0]:spans[i][1]:spans[i][1]]
		}
	}
	return merged[:own:own], verdicts, nil
}

// listenerEntries are a ListenerSet's listeners as Gateway listeners: the two types
// have the same fields.
func listenerEntries(set *gatewayv1.ListenerSet) []gatewayv1.Listener {
	out := make([]gatewayv1.Listener, len(set.Spec.Listeners))
	for i, l := range set.Spec.Listeners {
		out[i] = gatewayv1.Listener(l)
	}
	return out
}

// finishListenerSets decides each ListenerSet's Accepted condition once the Gateway's
// own verdict is known.
func finishListenerSets(v *gatewayVerdict, gw *gatewayv1.Gateway) {
	for i := range v.sets {
		s := &v.sets[i]
		switch {
		case !s.allowed:
			s.reason = gatewayv1.ListenerSetReasonNotAllowed
			s.message = fmt.Sprintf("Gateway %s/%s does not allow this ListenerSet (spec.allowedListeners)", gw.Namespace, gw.Name)
		case !v.admitsRoutes():
			s.reason = gatewayv1.ListenerSetReasonParentNotAccepted
			s.message = fmt.Sprintf("Gateway %s/%s is not accepted: %s", gw.Namespace, gw.Name, v.message)
		case len(s.invalidListeners()) == len(s.listeners):
			s.reason, s.message = gatewayv1.ListenerSetReasonListenersNotValid, "no listener is valid"
		case len(s.invalidListeners()) > 0:
			s.accepted, s.reason = true, gatewayv1.ListenerSetReasonAccepted
			s.message = fmt.Sprintf("listeners %s are not valid; the others are served", strings.Join(s.invalidListeners(), ", "))
		default:
			s.accepted, s.reason, s.message = true, gatewayv1.ListenerSetReasonAccepted, "ListenerSet is valid"
		}
	}
}

func (s *listenerSetVerdict) invalidListeners() []string {
	var invalid []string
	for _, l := range s.listeners {
		if !l.programmable() {
			invalid = append(invalid, string(l.listener.Name))
		}
	}
	return invalid
}

// parentGatewayOf resolves a ListenerSet's parentRef to a Gateway whose class is ours;
// ok is false for a parent of another kind, a missing Gateway or another
// controller's.
func (d *decider) parentGatewayOf(set *gatewayv1.ListenerSet) (*gatewayv1.Gateway, *gatewayv1.GatewayClass, bool, error) {
	ref := set.Spec.ParentRef
	return d.ourGateway(gatewayv1.ParentReference{Group: ref.Group, Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name}, set.Namespace)
}

// listenerSetStatus computes the status of a ListenerSet whose parent is a Gateway of
// ours.
func (d *decider) listenerSetStatus(set *gatewayv1.ListenerSet, gw *gatewayv1.Gateway, class *gatewayv1.GatewayClass, now metav1.Time) (gatewayv1.ListenerSetStatus, error) {
	v, err := d.evaluateGateway(gw, class)
	if err != nil {
		return gatewayv1.ListenerSetStatus{}, err
	}
	sv := v.listenerSet(cache.MetaObjectToName(set))
	if sv == nil {
		return gatewayv1.ListenerSetStatus{}, fmt.Errorf("ListenerSet %s/%s is not among the ListenerSets of Gateway %s/%s", set.Namespace, set.Name, gw.Namespace, gw.Name)
	}
	attached, err := d.attachedRoutesOfListenerSet(set, gw, v)
	if err != nil {
		return gatewayv1.ListenerSetStatus{}, err
	}
	gen := set.Generation
	gatewayProgrammed := d.programmedCondition(gw, v, gw.Generation)
	programmed := listenerSetProgrammed(sv, gatewayProgrammed, gen)
	status := gatewayv1.ListenerSetStatus{
		Conditions: mergeConditions(set.Status.Conditions, []metav1.Condition{
			condition(gatewayv1.ListenerSetConditionAccepted, sv.accepted, sv.reason, sv.message, gen),
			programmed,
		}, now),
	}
	for i := range sv.listeners {
		st := &sv.listeners[i]
		status.Listeners = append(status.Listeners, gatewayv1.ListenerEntryStatus{
			Name:           st.listener.Name,
			SupportedKinds: st.supportedKinds,
			AttachedRoutes: attached[st.listener.Name],
			Conditions:     mergeConditions(existingEntryConditions(set, st.listener.Name), listenerConditions(st, programmed, gen), now),
		})
	}
	return status, nil
}

// listenerSetProgrammed is the ListenerSet's Programmed condition: its Gateway's
// when it is accepted, False with its Accepted reason otherwise.
func listenerSetProgrammed(sv *listenerSetVerdict, gatewayProgrammed metav1.Condition, gen int64) metav1.Condition {
	if !sv.accepted {
		return condition(gatewayv1.ListenerSetConditionProgrammed, false, sv.reason, "The ListenerSet is not accepted", gen)
	}
	programmed := gatewayProgrammed
	programmed.Type = string(gatewayv1.ListenerSetConditionProgrammed)
	programmed.ObservedGeneration = gen
	return programmed
}

func existingEntryConditions(set *gatewayv1.ListenerSet, name gatewayv1.SectionName) []metav1.Condition {
	for _, l := range set.Status.Listeners {
		if l.Name == name {
			return l.Conditions
		}
	}
	return nil
}

// attachedRoutesOfListenerSet counts, per listener of the ListenerSet, the routes
// accepted on it that attach to the listener, from the routes' specs.
func (d *decider) attachedRoutesOfListenerSet(set *gatewayv1.ListenerSet, gw *gatewayv1.Gateway, v gatewayVerdict) (map[gatewayv1.SectionName]int32, error) {
	key := cache.MetaObjectToName(set)
	return d.countAttached(informers.RouteParentListenerSetIndex, key.String(), v, func(ref gatewayv1.ParentReference, routeNamespace string) bool {
		return gatewayapi.IsListenerSet(ref) && gatewayapi.Referent(routeNamespace, ref.Namespace, ref.Name) == key
	}, parentTarget{gw: gw, listenerSet: &key})
}
