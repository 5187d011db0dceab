package cli

import (
	"path/filepath"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
)

// decideRoute spells out, backendRef by backendRef, what the workers decide for a
// route: the Consul service each resolves to, or why it does not.
func TestDecideRoute(t *testing.T) {
	objects, refused, err := readObjects([]string{filepath.Join("testdata", "refusals.in.yaml")}, nil)
	if err != nil || len(refused) > 0 {
		t.Fatal(err, refused)
	}
	port := new(gatewayv1.PortNumber(8080))
	// A route Consul can serve nothing of: an IP address for a hostname, and a rule
	// whose query parameter regex does not compile.
	objects = append(objects, &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "odd"},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "edge", Namespace: new(gatewayv1.Namespace("infra"))}}},
			Hostnames:       []gatewayv1.Hostname{"10.1.2.3"},
			Rules: []gatewayv1.HTTPRouteRule{{
				Matches: []gatewayv1.HTTPRouteMatch{{QueryParams: []gatewayv1.HTTPQueryParamMatch{
					{Type: new(gatewayv1.QueryParamMatchRegularExpression), Name: "q", Value: "[a-"},
				}}},
				BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "web", Port: port}}}},
			}},
		},
	})
	ref := func(namespace, name string) gatewayv1.BackendObjectReference {
		r := gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(name), Port: port}
		if namespace != "" {
			r.Namespace = new(gatewayv1.Namespace(namespace))
		}
		return r
	}
	// A route read from a file is read as the API server stores it: with its CRD's
	// defaults.
	storedRef := func(namespace, name string) gatewayv1.BackendObjectReference {
		r := ref(namespace, name)
		r.Group, r.Kind = new(gatewayv1.Group("")), new(gatewayv1.Kind("Service"))
		return r
	}
	for _, tc := range []struct {
		route string
		want  routeExplanation
	}{{
		route: "shop",
		want: routeExplanation{Rules: []ruleExplanation{
			{Backends: []backendExplanation{{Ref: storedRef("", "web"), ResolvedBackend: gwsync.ResolvedBackend{ConsulService: "web"}}}},
			{Backends: []backendExplanation{{Ref: storedRef("", "cart"), ResolvedBackend: gwsync.ResolvedBackend{Problem: "backendRef shop/cart refers to a Service that does not exist"}}}},
		}},
	}, {
		route: "billing",
		want: routeExplanation{Rules: []ruleExplanation{
			{Backends: []backendExplanation{{Ref: storedRef("finance", "billing"), ResolvedBackend: gwsync.ResolvedBackend{
				Problem: "backendRef finance/billing is not permitted: no ReferenceGrant in namespace finance allows HTTPRoute from namespace shop to refer to it",
			}}}},
		}},
	}, {
		route: "odd",
		want: routeExplanation{
			HostnameProblem: `spec.hostnames "10.1.2.3" is an IP address; Gateway API allows only DNS names as route hostnames, so nothing of the route is served`,
			Rules: []ruleExplanation{{
				Problem:  "rule 0: match 0 query param q regex \"[a-\" is not valid RE2 (error parsing regexp: missing closing ]: `[a-`)",
				Backends: []backendExplanation{{Ref: ref("", "web"), ResolvedBackend: gwsync.ResolvedBackend{ConsulService: "web"}}},
			}},
		},
	}} {
		t.Run(tc.route, func(t *testing.T) {
			route, others := splitRoute(t, objects, "shop", tc.route)
			got, err := decideRoute(gwsync.OfflineConfig{ControllerName: gwsync.DefaultControllerName, Capabilities: consullimits.Consul115}, route, others)
			if err != nil {
				t.Fatal(err)
			}
			if diff := gocmp.Diff(tc.want, got); diff != "" {
				t.Errorf("explanation (-want +got):\n%s", diff)
			}
		})
	}
}

// splitRoute finds the HTTPRoute namespace/name among objects, and returns it and the
// others.
func splitRoute(t *testing.T, objects []runtime.Object, namespace, name string) (runtime.Object, []runtime.Object) {
	t.Helper()
	var route runtime.Object
	var others []runtime.Object
	for _, obj := range objects {
		if r, ok := obj.(*gatewayv1.HTTPRoute); ok && r.Namespace == namespace && r.Name == name {
			route = obj
			continue
		}
		others = append(others, obj)
	}
	if route == nil {
		t.Fatalf("no HTTPRoute %s/%s", namespace, name)
	}
	return route, others
}
