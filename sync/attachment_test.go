package sync

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

// notServed is the ConsulAccepted condition of a parent whose attached listeners
// cannot be programmed.
var notServed = summary{ConsulAcceptedCondition, "False", "ListenersNotValid"}

// Attachment is decided by allowedRoutes, parentRefs and hostnames alone: "Listener or
// Route status does not impact successful attachment" (ListenerStatus.AttachedRoutes),
// as the conformance test GatewayWithAttachedRoutes checks with an unresolved
// certificate. A route attached only to listeners that cannot be programmed is
// Accepted and counted, and its ConsulAccepted says it is not served there.
func TestAttachmentIgnoresListenerStatus(t *testing.T) {
	t.Parallel()
	mixedKinds := allowAll(httpListener("mixed", 80, ""))
	mixedKinds.AllowedRoutes.Kinds = []gatewayv1.RouteGroupKind{{Kind: "HTTPRoute"}, {Kind: "BogusRoute"}}
	gw := func(listeners ...gatewayv1.Listener) *gatewayv1.Gateway { return gateway("infra", "gw", listeners...) }
	key := cache.ObjectName{Namespace: "infra", Name: "gw"}

	tests := []struct {
		name        string
		gateway     *gatewayv1.Gateway
		route       *gatewayv1.HTTPRoute
		parent      []summary
		attached    map[gatewayv1.SectionName]int32
		attachments []decision.Attachment
	}{{
		name:     "the only listener's certificate is missing",
		gateway:  gw(httpsListener("tls", 443, "", "does-not-exist")),
		route:    httpRoute("infra", "r", nil, parentRef("infra", "gw", "tls")),
		parent:   []summary{{"Accepted", "True", "Accepted"}, {"ResolvedRefs", "True", "ResolvedRefs"}, notServed},
		attached: map[gatewayv1.SectionName]int32{"tls": 1},
	}, {
		// The listener serves the kind it supports: the route is attached and served.
		name:        "allowedRoutes.kinds mixes HTTPRoute and a bogus kind",
		gateway:     gw(mixedKinds),
		route:       httpRoute("apps", "r", nil, parentRef("infra", "gw", "mixed")),
		parent:      accepted("Accepted"),
		attached:    map[gatewayv1.SectionName]int32{"mixed": 1},
		attachments: []decision.Attachment{{Gateway: key, Listeners: []gatewayv1.SectionName{"mixed"}}},
	}, {
		name:        "a valid and an unresolved listener: attached to both, served on the valid one",
		gateway:     gw(allowAll(httpListener("http", 80, "")), allowAll(httpsListener("tls", 443, "", "does-not-exist"))),
		route:       httpRoute("apps", "r", nil, parentRef("infra", "gw", "")),
		parent:      accepted("Accepted"),
		attached:    map[gatewayv1.SectionName]int32{"http": 1, "tls": 1},
		attachments: []decision.Attachment{{Gateway: key, Listeners: []gatewayv1.SectionName{"http"}}},
	}, {
		name:        "listeners in a hostname conflict still count the routes they admit",
		gateway:     gw(allowAll(httpListener("a", 80, "x.example.com")), allowAll(httpListener("b", 80, "x.example.com")), allowAll(httpListener("c", 81, ""))),
		route:       httpRoute("apps", "r", nil, parentRef("infra", "gw", "")),
		parent:      accepted("Accepted"),
		attached:    map[gatewayv1.SectionName]int32{"a": 1, "b": 1, "c": 1},
		attachments: []decision.Attachment{{Gateway: key, Listeners: []gatewayv1.SectionName{"c"}}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			class := ourClass()
			objs := []runtime.Object{class, tt.gateway, tt.route, service("apps", "echo", 8080), service("infra", "echo", 8080)}
			d := newTestDecider(t, objs...)
			view, rules, err := d.viewRoute(tt.route)
			if err != nil {
				t.Fatal(err)
			}
			parents, decision, err := d.routeParentStatuses(view, rules, nil, tt.route.Generation, metav1.Now())
			if err != nil {
				t.Fatal(err)
			}
			if len(parents) != 1 {
				t.Fatalf("%d parents, want 1", len(parents))
			}
			if diff := cmp.Diff(tt.parent, summarize(parents[0].Conditions)); diff != "" {
				t.Errorf("route parent conditions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.attachments, decision.Attachments); diff != "" {
				t.Errorf("attachments (-want +got):\n%s", diff)
			}
			status, err := d.gatewayStatus(tt.gateway, class, metav1.Now())
			if err != nil {
				t.Fatal(err)
			}
			got := map[gatewayv1.SectionName]int32{}
			for _, l := range status.Listeners {
				got[l.Name] = l.AttachedRoutes
			}
			if diff := cmp.Diff(tt.attached, got); diff != "" {
				t.Errorf("attachedRoutes (-want +got):\n%s", diff)
			}
		})
	}
}
