package sync

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func cond(condType string, status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: condType, Status: status, Reason: reason, Message: message}
}

func routeWith(parents ...gatewayv1.RouteParentStatus) *gatewayv1.HTTPRoute {
	return &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", UID: "route-uid"},
		Status:     gatewayv1.HTTPRouteStatus{RouteStatus: gatewayv1.RouteStatus{Parents: parents}},
	}
}

func parentStatus(controller gatewayv1.GatewayController, gateway string, conds ...metav1.Condition) gatewayv1.RouteParentStatus {
	return gatewayv1.RouteParentStatus{ParentRef: gatewayv1.ParentReference{Name: gatewayv1.ObjectName(gateway)}, ControllerName: controller, Conditions: conds}
}

func TestStatusEvents(t *testing.T) {
	accepted := cond("Accepted", metav1.ConditionTrue, "Accepted", "Route is accepted")
	notAllowed := cond("Accepted", metav1.ConditionFalse, "NotAllowedByListeners", "no listener allows HTTPRoute")
	resolved := cond("ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs", "resolved")
	missing := cond("ResolvedRefs", metav1.ConditionFalse, "BackendNotFound", "Service apps/api not found")
	writeFailed := cond(ConsulAcceptedCondition, metav1.ConditionFalse, "ConsulWriteFailed", "Permission denied")
	pending := cond(ConsulAcceptedCondition, metav1.ConditionUnknown, "Pending", "waiting for Consul")

	tests := []struct {
		name          string
		before, after runtime.Object
		want          []statusEvent
	}{
		{
			name:   "a new route accepted with a missing backend",
			before: routeWith(),
			after:  routeWith(parentStatus(testController, "gw", accepted, missing, pending)),
			want: []statusEvent{
				{corev1.EventTypeWarning, "BackendNotFound", "ResolveRefs", "parent gw: ResolvedRefs=False: Service apps/api not found"},
			},
		},
		{
			name:   "unchanged conditions give no event, a refused Consul write does",
			before: routeWith(parentStatus(testController, "gw", accepted, resolved, pending)),
			after:  routeWith(parentStatus(testController, "gw", accepted, resolved, writeFailed)),
			want:   []statusEvent{{corev1.EventTypeWarning, "ConsulWriteFailed", "Program", "parent gw: " + ConsulAcceptedCondition + "=False: Permission denied"}},
		},
		{
			name:   "Pending is not news",
			before: routeWith(parentStatus(testController, "gw", accepted, resolved)),
			after:  routeWith(parentStatus(testController, "gw", accepted, resolved, cond(ConsulAcceptedCondition, metav1.ConditionFalse, "Pending", "Waiting for Consul"))),
		},
		{
			name:   "a new reason with the same status is a transition",
			before: routeWith(parentStatus(testController, "gw", notAllowed)),
			after:  routeWith(parentStatus(testController, "gw", cond("Accepted", metav1.ConditionFalse, "NoMatchingListenerHostname", "no hostname matches"))),
			want:   []statusEvent{{corev1.EventTypeWarning, "NoMatchingListenerHostname", "Attach", "parent gw: Accepted=False: no hostname matches"}},
		},
		{
			name:   "only a message changed",
			before: routeWith(parentStatus(testController, "gw", missing)),
			after:  routeWith(parentStatus(testController, "gw", cond("ResolvedRefs", metav1.ConditionFalse, "BackendNotFound", "Service apps/db not found"))),
		},
		{
			name:   "another controller's parents are not ours to report",
			before: routeWith(),
			after:  routeWith(parentStatus("other.example.com/controller", "theirs", notAllowed), parentStatus(testController, "gw", notAllowed)),
			want:   []statusEvent{{corev1.EventTypeWarning, "NotAllowedByListeners", "Attach", "parent gw: Accepted=False: no listener allows HTTPRoute"}},
		},
		{
			name:   "True after False is a recovery",
			before: routeWith(parentStatus(testController, "gw", notAllowed, missing)),
			after:  routeWith(parentStatus(testController, "gw", accepted, resolved)),
			want: []statusEvent{
				{corev1.EventTypeNormal, "Accepted", "Attach", "parent gw: Accepted=True: Route is accepted"},
				{corev1.EventTypeNormal, "ResolvedRefs", "ResolveRefs", "parent gw: ResolvedRefs=True: resolved"},
			},
		},
		{
			name:   "another route takes this route's requests, then goes away",
			before: routeWith(parentStatus(testController, "gw", accepted, resolved, cond(RoutedAsSpecifiedCondition, metav1.ConditionTrue, ReasonRoutedAsSpecified, "as the spec says"))),
			after:  routeWith(parentStatus(testController, "gw", accepted, resolved, cond(RoutedAsSpecifiedCondition, metav1.ConditionFalse, ReasonHiddenByHostname, "GET foo.example.com/b: 404"))),
			want:   []statusEvent{{corev1.EventTypeWarning, ReasonHiddenByHostname, "Route", "parent gw: " + RoutedAsSpecifiedCondition + "=False: GET foo.example.com/b: 404"}},
		},
		{
			name:   "routed as specified again",
			before: routeWith(parentStatus(testController, "gw", accepted, resolved, cond(RoutedAsSpecifiedCondition, metav1.ConditionFalse, ReasonTieOrderedByConsul, "tie"))),
			after:  routeWith(parentStatus(testController, "gw", accepted, resolved, cond(RoutedAsSpecifiedCondition, metav1.ConditionTrue, ReasonRoutedAsSpecified, "as the spec says"))),
			want:   []statusEvent{{corev1.EventTypeNormal, ReasonRoutedAsSpecified, "Route", "parent gw: " + RoutedAsSpecifiedCondition + "=True: as the spec says"}},
		},
		{
			name:   "True after Pending is no news",
			before: routeWith(parentStatus(testController, "gw", accepted, resolved, cond(ConsulAcceptedCondition, metav1.ConditionFalse, "Pending", "Waiting for Consul"))),
			after:  routeWith(parentStatus(testController, "gw", accepted, resolved, cond(ConsulAcceptedCondition, metav1.ConditionTrue, "Accepted", "Consul accepted the route"))),
		},
		{
			name: "gateway and listener transitions",
			before: &gatewayv1.Gateway{Status: gatewayv1.GatewayStatus{
				Conditions: []metav1.Condition{cond("Accepted", metav1.ConditionTrue, "Accepted", "ok"), cond("Programmed", metav1.ConditionTrue, "Programmed", "ok")},
				Listeners:  []gatewayv1.ListenerStatus{{Name: "https", Conditions: []metav1.Condition{cond("ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs", "ok")}}},
			}},
			after: &gatewayv1.Gateway{Status: gatewayv1.GatewayStatus{
				Conditions: []metav1.Condition{cond("Accepted", metav1.ConditionTrue, "Accepted", "ok"), cond("Programmed", metav1.ConditionTrue, "Programmed", "ok")},
				Listeners:  []gatewayv1.ListenerStatus{{Name: "https", Conditions: []metav1.Condition{cond("ResolvedRefs", metav1.ConditionFalse, "InvalidCertificateRef", "Secret apps/tls not found")}}},
			}},
			want: []statusEvent{{corev1.EventTypeWarning, "InvalidCertificateRef", "ResolveRefs", "listener https: ResolvedRefs=False: Secret apps/tls not found"}},
		},
		{
			name:   "transitions of the same kind on two listeners make one event that names both",
			before: &gatewayv1.Gateway{},
			after: &gatewayv1.Gateway{Status: gatewayv1.GatewayStatus{
				Listeners: []gatewayv1.ListenerStatus{
					{Name: "http", Conditions: []metav1.Condition{cond("Accepted", metav1.ConditionTrue, "Accepted", "ok")}},
					{Name: "https", Conditions: []metav1.Condition{cond("Accepted", metav1.ConditionTrue, "Accepted", "ok"), cond("ResolvedRefs", metav1.ConditionFalse, "InvalidCertificateRef", "no Secret")}},
					{Name: "tcp", Conditions: []metav1.Condition{cond("Accepted", metav1.ConditionTrue, "Accepted", "ok")}},
				},
			}},
			want: []statusEvent{
				{corev1.EventTypeWarning, "InvalidCertificateRef", "ResolveRefs", "listener https: ResolvedRefs=False: no Secret"},
			},
		},
		{
			name:   "a ListenerSet refused, and a listener of it",
			before: &gatewayv1.ListenerSet{},
			after: &gatewayv1.ListenerSet{Status: gatewayv1.ListenerSetStatus{
				Conditions: []metav1.Condition{cond("Accepted", metav1.ConditionFalse, "NotAllowed", "Gateway infra/gw does not allow this ListenerSet")},
				Listeners:  []gatewayv1.ListenerEntryStatus{{Name: "alt", Conditions: []metav1.Condition{cond("ResolvedRefs", metav1.ConditionFalse, "InvalidCertificateRef", "no Secret")}}},
			}},
			want: []statusEvent{
				{corev1.EventTypeWarning, "NotAllowed", "Accept", "Accepted=False: Gateway infra/gw does not allow this ListenerSet"},
				{corev1.EventTypeWarning, "InvalidCertificateRef", "ResolveRefs", "listener alt: ResolvedRefs=False: no Secret"},
			},
		},
		{
			name:   "a class accepted at last",
			before: &gatewayv1.GatewayClass{Status: gatewayv1.GatewayClassStatus{Conditions: []metav1.Condition{cond("Accepted", metav1.ConditionFalse, "InvalidParameters", "no such parameters")}}},
			after:  &gatewayv1.GatewayClass{Status: gatewayv1.GatewayClassStatus{Conditions: []metav1.Condition{cond("Accepted", metav1.ConditionTrue, "Accepted", "GatewayClass is accepted")}}},
			want:   []statusEvent{{corev1.EventTypeNormal, "Accepted", "Accept", "Accepted=True: GatewayClass is accepted"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := statusEvents(tt.before, tt.after, testController)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEventNoteIsTruncatedOnARuneBoundary(t *testing.T) {
	long := strings.Repeat("é", maxEventNote) // two bytes each
	got := statusEvents(routeWith(), routeWith(parentStatus(testController, "gw", cond("Accepted", metav1.ConditionFalse, "X", long))), testController)
	if len(got) != 1 {
		t.Fatalf("got %d events, want 1", len(got))
	}
	if note := got[0].Note; len(note) > maxEventNote || !strings.HasSuffix(note, "…") || !utf8.ValidString(note) {
		t.Errorf("note of %d bytes, valid UTF-8 %v: want at most %d bytes, cut on a rune, ending in …", len(note), utf8.ValidString(note), maxEventNote)
	}
}

func TestEventEmitterRateLimitsPerObject(t *testing.T) {
	recorder := events.NewFakeRecorder(100)
	emitter := newEventEmitter(recorder)
	ev := statusEvent{corev1.EventTypeWarning, "BackendNotFound", "ResolveRefs", "parent gw: ResolvedRefs=False"}
	flapping, other := routeWith(), routeWith()
	other.UID = "other-uid"
	for range 3 * eventBurst {
		emitter.emit(t.Context(), flapping, []statusEvent{ev})
	}
	emitter.emit(t.Context(), other, []statusEvent{ev})
	if got := len(recorder.Events); got != eventBurst+1 {
		t.Errorf("recorded %d events, want %d from the flapping object and 1 from the other", got, eventBurst+1)
	}
	if got := <-recorder.Events; got != "Warning BackendNotFound parent gw: ResolvedRefs=False" {
		t.Errorf("first event = %q", got)
	}
}
