package sync

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// statusEvent is an Event a status change deserves.
type statusEvent struct {
	Type   string // corev1.EventTypeNormal or corev1.EventTypeWarning
	Reason string
	Action string
	Note   string
}

// maxEventNote is the events.k8s.io/v1 limit on a note.
const maxEventNote = 1024

// eventedConditions are the conditions whose transitions are worth an Event, with the
// action each names. The rest follow from these (Programmed of a listener, Conflicted)
// or change with them.
var (
	classEvented   = []evented{{"Accepted", "Accept"}, {"SupportedVersion", "CheckVersion"}}
	gatewayEvented = []evented{{"Accepted", "Accept"}, {"Programmed", "Program"}}
	// A ListenerSet's conditions and listeners are a Gateway's, for the listeners it
	// adds to one.
	listenerSetEvented = gatewayEvented
	listenerEvented    = []evented{{"Accepted", "Accept"}, {"ResolvedRefs", "ResolveRefs"}}
	routeEvented       = []evented{{"Accepted", "Attach"}, {"ResolvedRefs", "ResolveRefs"}, {ConsulAcceptedCondition, "Program"}, {RoutedAsSpecifiedCondition, "Route"}}
)

type evented struct{ condType, action string }

// statusEvents compares an object's status before and after our write and returns an
// Event for each condition of ours that changed its status or reason: a Warning when
// it is now False, a Normal event when it is True again after being False. Unknown and
// Pending conditions, unchanged ones, and a first True (what every healthy object
// reaches, thousands at once on a cold start) produce none, so an Event marks a
// transition a user can act on.
//
// Transitions with the same type, reason and action become one Event whose note lists
// each: client-go folds Events that differ only in their note into one series and
// keeps the first note, so separate Events about two listeners would lose one.
func statusEvents(before, after runtime.Object, controller gatewayv1.GatewayController) []statusEvent {
	return merged(transitions(before, after, controller))
}

// merged joins the notes of events with the same type, reason and action, in order.
func merged(events []statusEvent) []statusEvent {
	var out []statusEvent
	index := map[[3]string]int{}
	for _, e := range events {
		key := [3]string{e.Type, e.Reason, e.Action}
		i, ok := index[key]
		if !ok {
			index[key] = len(out)
			out = append(out, e)
			continue
		}
		out[i].Note += "; " + e.Note
	}
	for i := range out {
		out[i].Note = gatewayapi.Truncate(out[i].Note, maxEventNote)
	}
	return out
}

func transitions(before, after runtime.Object, controller gatewayv1.GatewayController) []statusEvent {
	switch a := after.(type) {
	case *gatewayv1.GatewayClass:
		b, _ := before.(*gatewayv1.GatewayClass)
		return conditionEvents("", classEvented, classConditions(b), a.Status.Conditions)
	case *gatewayv1.Gateway:
		b, _ := before.(*gatewayv1.Gateway)
		return gatewayEvents(b, a)
	case *gatewayv1.ListenerSet:
		b, _ := before.(*gatewayv1.ListenerSet)
		return listenerSetEvents(b, a)
	}
	if kind, ok := gatewayapi.RouteOf(after); ok {
		return routeEvents(kind.Parents(before), kind.Parents(after), controller)
	}
	return nil
}

func classConditions(c *gatewayv1.GatewayClass) []metav1.Condition {
	if c == nil {
		return nil
	}
	return c.Status.Conditions
}

func gatewayEvents(before, after *gatewayv1.Gateway) []statusEvent {
	var old []metav1.Condition
	oldListeners := map[gatewayv1.SectionName][]metav1.Condition{}
	if before != nil {
		old = before.Status.Conditions
		for _, l := range before.Status.Listeners {
			oldListeners[l.Name] = l.Conditions
		}
	}
	events := conditionEvents("", gatewayEvented, old, after.Status.Conditions)
	for _, l := range after.Status.Listeners {
		events = append(events, conditionEvents(fmt.Sprintf("listener %s", l.Name), listenerEvented, oldListeners[l.Name], l.Conditions)...)
	}
	return events
}

func listenerSetEvents(before, after *gatewayv1.ListenerSet) []statusEvent {
	var old []metav1.Condition
	oldListeners := map[gatewayv1.SectionName][]metav1.Condition{}
	if before != nil {
		old = before.Status.Conditions
		for _, l := range before.Status.Listeners {
			oldListeners[l.Name] = l.Conditions
		}
	}
	events := conditionEvents("", listenerSetEvented, old, after.Status.Conditions)
	for _, l := range after.Status.Listeners {
		events = append(events, conditionEvents(fmt.Sprintf("listener %s", l.Name), listenerEvented, oldListeners[l.Name], l.Conditions)...)
	}
	return events
}

func routeEvents(before, after []gatewayv1.RouteParentStatus, controller gatewayv1.GatewayController) []statusEvent {
	var events []statusEvent
	for _, p := range after {
		if p.ControllerName != controller {
			continue
		}
		var old []metav1.Condition
		for _, q := range before {
			if q.ControllerName == controller && apiequality.Semantic.DeepEqual(q.ParentRef, p.ParentRef) {
				old = q.Conditions
				break
			}
		}
		events = append(events, conditionEvents("parent "+gatewayapi.ParentName(p.ParentRef), routeEvented, old, p.Conditions)...)
	}
	return events
}

func conditionEvents(subject string, watched []evented, before, after []metav1.Condition) []statusEvent {
	var events []statusEvent
	for _, w := range watched {
		now := findCondition(after, w.condType)
		// Pending is a step on the way (Consul has not answered yet), not news.
		if now == nil || now.Status == metav1.ConditionUnknown || now.Reason == string(gatewayv1.GatewayReasonPending) {
			continue
		}
		was := findCondition(before, w.condType)
		if was != nil && was.Status == now.Status && was.Reason == now.Reason {
			continue
		}
		eventType := corev1.EventTypeWarning
		if now.Status == metav1.ConditionTrue {
			if was == nil || was.Status != metav1.ConditionFalse || was.Reason == string(gatewayv1.GatewayReasonPending) {
				continue // a first True is no news
			}
			eventType = corev1.EventTypeNormal
		}
		note := fmt.Sprintf("%s=%s: %s", now.Type, now.Status, now.Message)
		if subject != "" {
			note = subject + ": " + note
		}
		events = append(events, statusEvent{Type: eventType, Reason: now.Reason, Action: w.action, Note: note})
	}
	return events
}
