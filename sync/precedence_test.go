package sync

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

var update = flag.Bool("update", false, "rewrite testdata/precedence/*.out.yaml from the decision")

// precedenceDecoder decodes the objects of testdata/precedence/*.in.yaml strictly.
var precedenceDecoder = func() runtime.Decoder {
	scheme := runtime.NewScheme()
	utilruntime.Must(gatewayv1.Install(scheme))
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
}()

// routedSummary is the RoutedAsSpecified condition of one parent of one route, as
// testdata/precedence/*.out.yaml holds it.
type routedSummary struct {
	Route   string `json:"route"`
	Parent  string `json:"parent"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// TestRoutedAsSpecified judges the routes of each testdata/precedence/<case>.in.yaml
// (Gateways of class "ours" and their routes; creationTimestamp orders them) and
// compares every parent's RoutedAsSpecified condition with <case>.out.yaml. -update
// rewrites the .out.yaml files; review them as code.
func TestRoutedAsSpecified(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob(filepath.Join("testdata", "precedence", "*.in.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no testdata/precedence/*.in.yaml (%v)", err)
	}
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".in.yaml")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := routedSummaries(t, readPrecedenceObjects(t, path))
			compareSummaries(t, "TestRoutedAsSpecified", path, got)
		})
	}
}

// compareSummaries compares the summaries judged from path, a <case>.in.yaml, with
// the <case>.out.yaml beside it, or with -update writes them there.
func compareSummaries[T any](t *testing.T, test, path string, got []T) {
	t.Helper()
	golden := strings.TrimSuffix(path, ".in.yaml") + ".out.yaml"
	if *update {
		data, err := yaml.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		header := "# Written by " + test + " -update from the .in.yaml beside it.\n"
		if err := os.WriteFile(golden, append([]byte(header), data...), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	var want []T
	if err := yaml.UnmarshalStrict(data, &want); err != nil {
		t.Fatalf("%s: %v", golden, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conditions (-%s +got):\n%s", golden, diff)
	}
}

func readPrecedenceObjects(t *testing.T, path string) []runtime.Object {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs := []runtime.Object{ourClass()}
	docs, err := testenv.YAMLDocuments(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, doc := range docs {
		obj, _, err := precedenceDecoder.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		objs = append(objs, obj)
	}
	return objs
}

// routedSummaries decides the status of every route among objs, in their order, and
// keeps each parent's RoutedAsSpecified condition.
func routedSummaries(t *testing.T, objs []runtime.Object) []routedSummary {
	t.Helper()
	d := newTestDecider(t, objs...)
	var out []routedSummary
	for _, obj := range objs {
		kind, ok := gatewayapi.RouteOf(obj)
		if !ok {
			continue
		}
		view, rules, err := d.viewRoute(obj)
		if err != nil {
			t.Fatal(err)
		}
		parents, _, err := d.routeParentStatuses(view, rules, nil, 1, metav1.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range parents {
			s := routedSummary{Route: string(kind.Kind) + " " + view.namespace + "/" + view.name, Parent: gatewayapi.ParentName(p.ParentRef), Status: "absent"}
			if c := findCondition(p.Conditions, RoutedAsSpecifiedCondition); c != nil {
				s.Status, s.Reason, s.Message = string(c.Status), c.Reason, c.Message
			}
			out = append(out, s)
		}
	}
	return out
}

// BenchmarkConflictsOf measures the decision for one route on a listener with 1,000
// routes of distinct prefixes and one catch-all, for the catch-all (which competes
// with every route) and for one of the others.
func BenchmarkConflictsOf(b *testing.B) {
	const n = 1000
	table := listenerTable{name: "http"}
	for i := range n {
		table.routes = append(table.routes, attachedRoute{
			key:       cache.ObjectName{Namespace: "apps", Name: fmt.Sprintf("r%04d", i)},
			hostnames: []string{anyHost}, consulHosts: []string{anyHost},
			rules: [][]routeMatch{{newRouteMatch(gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Value: ptrTo(fmt.Sprintf("/r%04d", i))}})}},
		})
	}
	table.routes = append(table.routes, attachedRoute{key: cache.ObjectName{Namespace: "apps", Name: "all"},
		hostnames: []string{anyHost}, consulHosts: []string{anyHost}, rules: [][]routeMatch{{newRouteMatch(gatewayv1.HTTPRouteMatch{})}}})
	for _, tc := range []struct {
		name  string
		route int
	}{{"catch-all", n}, {"one prefix", 7}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if got := table.conflictsOf(tc.route); len(got) != 0 {
					b.Fatalf("conflicts: %v", got)
				}
			}
		})
	}
}

// TestRoutedAsSpecifiedDisclosesNoOtherNamespace judges every
// testdata/precedence/*.in.yaml and requires that no route's RoutedAsSpecified
// message, nor the Events its status gives, names a route of another namespace or
// quotes one of its header or query values: the route's author may not be allowed to
// read that namespace.
func TestRoutedAsSpecifiedDisclosesNoOtherNamespace(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob(filepath.Join("testdata", "precedence", "*.in.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no testdata/precedence/*.in.yaml (%v)", err)
	}
	for _, path := range paths {
		objs := readPrecedenceObjects(t, path)
		routes := map[string][]string{} // namespace -> the "ns/name" and match values of its HTTPRoutes
		for _, obj := range objs {
			if r, ok := obj.(*gatewayv1.HTTPRoute); ok {
				routes[r.Namespace] = append(routes[r.Namespace], r.Namespace+"/"+r.Name)
				routes[r.Namespace] = append(routes[r.Namespace], matchValues(r)...)
			}
		}
		for _, j := range judgedRouteTexts(t, objs) {
			for other, secrets := range routes {
				if other == j.namespace {
					continue
				}
				for _, secret := range secrets {
					if strings.Contains(j.text, secret) {
						t.Errorf("%s: %s quotes %q of namespace %s: %s", path, j.what, secret, other, j.text)
					}
				}
			}
		}
	}
}

// judgedRouteText is a text a route's author reads: a RoutedAsSpecified message, or
// the note of the Event a new route's status gives.
type judgedRouteText struct {
	namespace, what, text string
}

// judgedRouteTexts decides the status of every route among objs and returns its
// RoutedAsSpecified messages and its Events' notes.
func judgedRouteTexts(t *testing.T, objs []runtime.Object) []judgedRouteText {
	t.Helper()
	d := newTestDecider(t, objs...)
	var out []judgedRouteText
	for _, obj := range objs {
		if _, ok := gatewayapi.RouteOf(obj); !ok {
			continue
		}
		view, rules, err := d.viewRoute(obj)
		if err != nil {
			t.Fatal(err)
		}
		parents, _, err := d.routeParentStatuses(view, rules, nil, 1, metav1.Now())
		if err != nil {
			t.Fatal(err)
		}
		name := view.namespace + "/" + view.name
		for _, p := range parents {
			if c := findCondition(p.Conditions, RoutedAsSpecifiedCondition); c != nil {
				out = append(out, judgedRouteText{view.namespace, "the message of " + name, c.Message})
			}
		}
		for _, e := range routeEvents(nil, parents, testController) {
			out = append(out, judgedRouteText{view.namespace, "an Event of " + name, e.Note})
		}
	}
	return out
}

// matchValues are the header and query param values of r's matches.
func matchValues(r *gatewayv1.HTTPRoute) []string {
	var out []string
	for _, rule := range r.Spec.Rules {
		for _, m := range rule.Matches {
			for _, h := range m.Headers {
				out = append(out, h.Value)
			}
			for _, q := range m.QueryParams {
				out = append(out, q.Value)
			}
		}
	}
	return out
}
