package cli

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
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

// explain with the controller's --responder-service judges and words a route as such
// a controller does: its RequestRedirect rule served, and the requests of its rule
// without a backend answered 500 by the responder. Without the flag the redirect rule
// is dropped, and both are answered by the blackhole.
func TestExplainWithResponder(t *testing.T) {
	objects, refused, err := readObjects([]string{filepath.Join("testdata", "responder.in.yaml")}, nil)
	if err != nil || len(refused) > 0 {
		t.Fatal(err, refused)
	}
	route, others := splitRoute(t, objects, "shop", "shop")
	consul := noInstancesConsul(t)
	for _, tc := range []struct {
		name  string
		flags []string
		want  []string
	}{{
		name: "without",
		want: []string{
			"rule 0 (PathPrefix /old): dropped: rule 0: filter RequestRedirect is not supported by Consul's API gateway; its requests are answered with HTTP 503 (the blackhole)",
			"backendRef shop/does-not-exist:8080: not resolved: backendRef shop/does-not-exist refers to a Service that does not exist; its share of the requests is answered with HTTP 503 (the blackhole)",
		},
	}, {
		name:  "with --responder-service",
		flags: []string{"--responder-service=consul-gateway-controller-responder"},
		want: []string{
			"rule 0 (PathPrefix /old): served",
			"backendRef shop/does-not-exist:8080: not resolved: backendRef shop/does-not-exist refers to a Service that does not exist; its share of the requests is answered with HTTP 500 (the responder)",
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var f statusFlags
			fs, _ := explainFlags(io.Discard, &f)
			if err := fs.Parse(tc.flags); err != nil {
				t.Fatal(err)
			}
			explanation, err := decideRoute(decisionConfig(f), route, others)
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			p := printer{w: &out, errorAnswer: errorAnswer(f.responderService)}
			p.rules(t.Context(), connections{consul: consul, reader: &consulReader{client: consul}}, gatewayapi.HTTPRouteKind, cache.ObjectName{Namespace: "shop", Name: "shop"}, route, explanation)
			if p.err != nil {
				t.Fatal(p.err)
			}
			var got []string
			for line := range strings.Lines(out.String()) {
				got = append(got, strings.TrimSpace(line))
			}
			for _, want := range tc.want {
				if !slices.Contains(got, want) {
					t.Errorf("explain does not say %q:\n%s", want, out.String())
				}
			}
		})
	}
}

// noInstancesConsul is a client of a Consul on loopback that knows no instance of any
// service.
func noInstancesConsul(t *testing.T) *consulapi.Client {
	t.Helper()
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v1/health/service/") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "[]")
	}))
	t.Cleanup(server.Close)
	client, err := consulapi.NewClient(&consulapi.Config{Address: strings.TrimPrefix(server.URL, "http://")})
	if err != nil {
		t.Fatal(err)
	}
	return client
}
