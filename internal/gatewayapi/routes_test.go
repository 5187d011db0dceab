package gatewayapi

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"
	gatewayfactory "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"
)

// routeFixture is one object of every route kind with the same parents and backends:
// two parentRefs to one Gateway (two sections), one to a Service parent, and backends
// that repeat a Service, name one in another namespace, and one of another kind.
func routeFixtures() map[gatewayv1.Kind]Object {
	meta := metav1.ObjectMeta{Namespace: "apps", Name: "r", ResourceVersion: "7"}
	parents := []gatewayv1.ParentReference{
		{Name: "gw", SectionName: new(gatewayv1.SectionName("a"))},
		{Name: "gw", SectionName: new(gatewayv1.SectionName("b"))},
		{Namespace: new(gatewayv1.Namespace("")), Name: "gw2"},
		{Group: new(gatewayv1.Group("")), Kind: new(gatewayv1.Kind("Service")), Name: "mesh"},
	}
	refs := []gatewayv1.BackendObjectReference{
		{Name: "web"},
		{Namespace: new(gatewayv1.Namespace("backends")), Name: "api"},
		{Group: new(gatewayv1.Group("example.com")), Kind: new(gatewayv1.Kind("Bucket")), Name: "files"},
	}
	http := &gatewayv1.HTTPRoute{ObjectMeta: meta}
	http.Spec.ParentRefs, http.Spec.Hostnames = parents, []gatewayv1.Hostname{"a.example.com"}
	tcp := &gatewayv1.TCPRoute{ObjectMeta: meta}
	tcp.Spec.ParentRefs = parents
	grpc := &gatewayv1.GRPCRoute{ObjectMeta: meta}
	grpc.Spec.ParentRefs, grpc.Spec.Hostnames = parents, []gatewayv1.Hostname{"a.example.com"}
	tls := &gatewayv1.TLSRoute{ObjectMeta: meta}
	tls.Spec.ParentRefs, tls.Spec.Hostnames = parents, []gatewayv1.Hostname{"a.example.com"}
	udp := &gatewayv1.UDPRoute{ObjectMeta: meta}
	udp.Spec.ParentRefs = parents
	for _, ref := range refs {
		http.Spec.Rules = append(http.Spec.Rules, gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: ref}}}})
		tcp.Spec.Rules = append(tcp.Spec.Rules, gatewayv1.TCPRouteRule{BackendRefs: []gatewayv1.BackendRef{{BackendObjectReference: ref}}})
		grpc.Spec.Rules = append(grpc.Spec.Rules, gatewayv1.GRPCRouteRule{BackendRefs: []gatewayv1.GRPCBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: ref}}}})
		tls.Spec.Rules = append(tls.Spec.Rules, gatewayv1.TLSRouteRule{BackendRefs: []gatewayv1.BackendRef{{BackendObjectReference: ref}}})
		udp.Spec.Rules = append(udp.Spec.Rules, gatewayv1.UDPRouteRule{BackendRefs: []gatewayv1.BackendRef{{BackendObjectReference: ref}}})
	}
	// The first Service again, in a rule of its own.
	http.Spec.Rules = append(http.Spec.Rules, http.Spec.Rules[0])
	tcp.Spec.Rules = append(tcp.Spec.Rules, tcp.Spec.Rules[0])
	grpc.Spec.Rules = append(grpc.Spec.Rules, grpc.Spec.Rules[0])
	tls.Spec.Rules = append(tls.Spec.Rules, tls.Spec.Rules[0])
	udp.Spec.Rules = append(udp.Spec.Rules, udp.Spec.Rules[0])
	return map[gatewayv1.Kind]Object{"HTTPRoute": http, "TCPRoute": tcp, "GRPCRoute": grpc, "TLSRoute": tls, "UDPRoute": udp}
}

func TestRoutesDescribeEveryKindAlike(t *testing.T) {
	fixtures := routeFixtures()
	if len(Routes) != len(fixtures) {
		t.Fatalf("%d route kinds described, %d have fixtures", len(Routes), len(fixtures))
	}
	for _, kind := range Routes {
		t.Run(string(kind.Kind), func(t *testing.T) {
			obj := fixtures[kind.Kind]
			if got, ok := RouteOf(obj); !ok || got.Kind != kind.Kind {
				t.Errorf("RouteOf(%T) = %q, %v", obj, got.Kind, ok)
			}
			if got, ok := Route(kind.Kind); !ok || got.Kind != kind.Kind {
				t.Errorf("Route(%q) = %q, %v", kind.Kind, got.Kind, ok)
			}
			spec, err := kind.Spec(obj)
			if err != nil {
				t.Fatal(err)
			}
			if len(spec.BackendRefs) != 4 || len(spec.ParentRefs) != 4 {
				t.Errorf("spec has %d rules and %d parentRefs, want 4 and 4", len(spec.BackendRefs), len(spec.ParentRefs))
			}
			withHostnames := kind.Kind != "TCPRoute" && kind.Kind != "UDPRoute"
			if withHostnames != (len(spec.Hostnames) == 1) {
				t.Errorf("hostnames %v, want the route's one", spec.Hostnames)
			}

			gateways, err := kind.ParentGateways(obj)
			if err != nil {
				t.Fatal(err)
			}
			wantGateways := []cache.ObjectName{{Namespace: "apps", Name: "gw"}, {Namespace: "apps", Name: "gw2"}}
			if diff := cmp.Diff(wantGateways, gateways); diff != "" {
				t.Errorf("parent Gateways (-want +got):\n%s", diff)
			}
			services, err := kind.BackendServices(obj)
			if err != nil {
				t.Fatal(err)
			}
			wantServices := []cache.ObjectName{{Namespace: "apps", Name: "web"}, {Namespace: "backends", Name: "api"}}
			if diff := cmp.Diff(wantServices, services); diff != "" {
				t.Errorf("backend Services (-want +got):\n%s", diff)
			}
		})
	}
}

// A description given an object of another kind says so, and never panics.
func TestRouteKindRefusesOtherKinds(t *testing.T) {
	fixtures := routeFixtures()
	for _, kind := range Routes {
		for other, obj := range fixtures {
			if other == kind.Kind {
				continue
			}
			if _, err := kind.Spec(obj); err == nil {
				t.Errorf("%s.Spec accepted a %s", kind.Kind, other)
			}
			if _, err := kind.ParentGateways(obj); err == nil {
				t.Errorf("%s.ParentGateways accepted a %s", kind.Kind, other)
			}
			if got := kind.Parents(obj); got != nil {
				t.Errorf("%s.Parents of a %s = %v", kind.Kind, other, got)
			}
			if _, err := kind.UpdateParents(t.Context(), fake.NewClientset(), obj, nil); err == nil {
				t.Errorf("%s.UpdateParents accepted a %s", kind.Kind, other)
			}
		}
		if got := kind.Parents(nil); got != nil {
			t.Errorf("%s.Parents(nil) = %v", kind.Kind, got)
		}
	}
	if _, ok := RouteOf(&gatewayv1.Gateway{}); ok {
		t.Error("a Gateway is described as a route")
	}
	if _, ok := Route("ListenerSet"); ok {
		t.Error("ListenerSet is described as a route")
	}
}

// UpdateParents writes the parents to the status subresource of the object it was
// given, leaving that object alone; Parents reads them back.
func TestRouteKindUpdateParents(t *testing.T) {
	parents := []gatewayv1.RouteParentStatus{{ParentRef: gatewayv1.ParentReference{Name: "gw"}, ControllerName: "example.com/c"}}
	for _, kind := range Routes {
		t.Run(string(kind.Kind), func(t *testing.T) {
			obj := routeFixtures()[kind.Kind]
			client := fake.NewClientset(obj)
			updated, err := kind.UpdateParents(t.Context(), client, obj, parents)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(parents, kind.Parents(updated)); diff != "" {
				t.Errorf("returned parents (-want +got):\n%s", diff)
			}
			if got := kind.Parents(obj); got != nil {
				t.Errorf("the given object was modified: parents %v", got)
			}
			actions := client.Actions()
			last := actions[len(actions)-1]
			if last.GetVerb() != "update" || last.GetSubresource() != "status" {
				t.Errorf("last action %s %s, want update status", last.GetVerb(), last.GetSubresource())
			}
		})
	}
}

// Each kind's informer is the factory's informer of that kind.
func TestRouteKindInformer(t *testing.T) {
	factory := gatewayfactory.NewSharedInformerFactory(fake.NewClientset(), 0)
	for _, kind := range Routes {
		informer := kind.Informer(factory.Gateway().V1())
		obj := routeFixtures()[kind.Kind]
		if err := informer.GetStore().Add(obj); err != nil {
			t.Fatalf("%s: %v", kind.Kind, err)
		}
		if got := informer.GetStore().List(); len(got) != 1 || !isKind(kind, got[0]) {
			t.Errorf("%s informer holds %v", kind.Kind, got)
		}
		if informer != kind.Informer(factory.Gateway().V1()) {
			t.Errorf("%s: a second call returned another informer", kind.Kind)
		}
	}
}

func isKind(kind RouteKind, obj any) bool {
	got, ok := RouteOf(obj)
	return ok && got.Kind == kind.Kind
}

func TestReferent(t *testing.T) {
	for _, tt := range []struct {
		namespace *gatewayv1.Namespace
		want      string
	}{
		{nil, "apps/x"},
		{new(gatewayv1.Namespace("")), "apps/x"},
		{new(gatewayv1.Namespace("other")), "other/x"},
	} {
		if got := Referent("apps", tt.namespace, "x").String(); got != tt.want {
			t.Errorf("Referent(apps, %v, x) = %s, want %s", tt.namespace, got, tt.want)
		}
	}
}
