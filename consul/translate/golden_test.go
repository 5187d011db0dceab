package translate

import (
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	gwdecision "github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

var update = flag.Bool("update", false, "rewrite testdata/*.out.yaml from the translation")

// translationCase is the input of one golden case, testdata/<name>.in.yaml (see
// testdata/README.md): the arguments of Translate, ownership apart (testOwnership).
type translationCase struct {
	name    string
	naming  Naming
	opts    Options
	objects []any // as snapshotOf takes them, in the file's order
}

// translationCases reads every testdata/*.in.yaml, in name order.
func translationCases(t testing.TB) []translationCase {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "*.in.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no testdata/*.in.yaml")
	}
	cases := make([]translationCase, 0, len(paths))
	for _, path := range paths {
		tc, err := readTranslationCase(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		cases = append(cases, tc)
	}
	return cases
}

// Documents of an .in.yaml file that are not Kubernetes objects.
const (
	kindTranslationOptions = "TranslationOptions"
	kindRouteDecision      = "RouteDecision"
)

// translationOptionsDoc is the TranslationOptions document: Translate's Naming and
// Options. Their fields are written lowerCamelCase (JSON matches them regardless of case).
type translationOptionsDoc struct {
	Kind    string  `json:"kind"`
	Naming  Naming  `json:"naming"`
	Options Options `json:"options"`
}

// routeDecisionDoc is a RouteDecision document: the status pipeline's decision for one
// route, confirmed with it. Its fields besides kind and route are those of
// gwdecision.Route, written lowerCamelCase.
type routeDecisionDoc struct {
	Kind  string   `json:"kind"`
	Route routeRef `json:"route"`
	RouteDecision
}

// RouteDecision names the embedded decision's field apart from routeDecisionDoc.Route.
type RouteDecision = gwdecision.Route

type routeRef struct {
	Kind      gatewayv1.Kind `json:"kind"`
	Namespace string         `json:"namespace"`
	Name      string         `json:"name"`
}

// testdataDecoder decodes the Kubernetes objects of the .in.yaml files: the kinds the
// snapshot holds, strictly (an unknown or repeated field is an error).
var testdataDecoder = func() runtime.Decoder {
	scheme := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(scheme))
	utilruntime.Must(gatewayv1.Install(scheme))
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
}()

func readTranslationCase(path string) (translationCase, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return translationCase{}, err
	}
	r := caseReader{
		tc:      translationCase{name: strings.TrimSuffix(filepath.Base(path), ".in.yaml")},
		routes:  map[routeRef]int{},
		decided: map[routeRef]bool{},
	}
	docs, err := testenv.YAMLDocuments(data)
	if err != nil {
		return r.tc, err
	}
	for n, doc := range docs {
		if err := r.document(doc); err != nil {
			return r.tc, fmt.Errorf("document %d: %w", n+1, err)
		}
	}
	for route := range r.routes {
		if !r.decided[route] {
			return r.tc, fmt.Errorf("%s %s/%s has no %s", route.Kind, route.Namespace, route.Name, kindRouteDecision)
		}
	}
	return r.tc, nil
}

// caseReader collects the documents of one .in.yaml file into a case.
type caseReader struct {
	tc          translationCase
	routes      map[routeRef]int // a route's index in tc.objects
	decided     map[routeRef]bool
	optionsRead bool
}

func (r *caseReader) document(doc []byte) error {
	var head metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return err
	}
	switch head.Kind {
	case "":
		return errors.New("no kind")
	case kindTranslationOptions:
		var opts translationOptionsDoc
		if err := yaml.UnmarshalStrict(doc, &opts); err != nil {
			return fmt.Errorf("%s: %w", head.Kind, err)
		}
		if r.optionsRead {
			return fmt.Errorf("a second %s", head.Kind)
		}
		r.optionsRead = true
		r.tc.naming, r.tc.opts = opts.Naming, opts.Options
	case kindRouteDecision:
		var d routeDecisionDoc
		if err := yaml.UnmarshalStrict(doc, &d); err != nil {
			return fmt.Errorf("%s: %w", head.Kind, err)
		}
		return r.decision(d)
	default:
		obj, _, err := testdataDecoder.Decode(doc, nil, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", head.Kind, err)
		}
		return r.object(obj)
	}
	return nil
}

// decision files d with its route, which came before it.
func (r *caseReader) decision(d routeDecisionDoc) error {
	i, ok := r.routes[d.Route]
	if !ok || r.decided[d.Route] {
		return fmt.Errorf("a %s for %+v, which is not a route above or has one already", kindRouteDecision, d.Route)
	}
	r.decided[d.Route] = true
	switch route := r.tc.objects[i].(type) {
	case confirmedHTTPRoute:
		route.Decision = d.RouteDecision
		r.tc.objects[i] = route
	case confirmedTCPRoute:
		route.Decision = d.RouteDecision
		r.tc.objects[i] = route
	}
	return nil
}

// object adds a Kubernetes object; a route keeps its place and waits for its decision.
func (r *caseReader) object(obj runtime.Object) error {
	// As an informer's cache holds them: typed objects carry no TypeMeta.
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	switch o := obj.(type) {
	case *gatewayv1.HTTPRoute:
		r.routes[routeRef{"HTTPRoute", o.Namespace, o.Name}] = len(r.tc.objects)
		r.tc.objects = append(r.tc.objects, confirmedHTTPRoute{Route: o})
	case *gatewayv1.TCPRoute:
		r.routes[routeRef{"TCPRoute", o.Namespace, o.Name}] = len(r.tc.objects)
		r.tc.objects = append(r.tc.objects, confirmedTCPRoute{Route: o})
	case *gatewayv1.Gateway, *gatewayv1.ListenerSet, *corev1.Secret:
		r.tc.objects = append(r.tc.objects, o)
	case *corev1.Service:
		return errors.New("the translation reads no Service: a RouteDecision's backends say what each backendRef resolved to")
	default:
		return fmt.Errorf("the snapshot holds no %s", kind)
	}
	return nil
}

// goldenEntry is one entry of a translation as the golden files hold it: its key, and
// the JSON Consul's API client sends.
type goldenEntry struct {
	Kind, Partition, Namespace, Name string
	Entry                            consulapi.ConfigEntry
}

// goldenTranslation is a translation as the golden files hold it: entries sorted by
// kind, partition, namespace and name, then the problems.
type goldenTranslation struct {
	Entries  []goldenEntry
	Problems []Problem
}

func goldenOf(d Desired) goldenTranslation {
	out := goldenTranslation{Entries: []goldenEntry{}, Problems: d.Problems}
	if out.Problems == nil {
		out.Problems = []Problem{}
	}
	for k, e := range d.Entries {
		out.Entries = append(out.Entries, goldenEntry{k.Kind, k.Partition, k.Namespace, k.Name, e})
	}
	slices.SortFunc(out.Entries, func(a, b goldenEntry) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// goldenForm is the translation as testdata/<case>.out.yaml holds it (goldenOf), as YAML.
func goldenForm(t *testing.T, d Desired) []byte {
	t.Helper()
	b, err := json.Marshal(goldenOf(d))
	if err != nil {
		t.Fatal(err)
	}
	y, err := yaml.JSONToYAML(b)
	if err != nil {
		t.Fatal(err)
	}
	return y
}

// TestTranslateGolden translates each testdata/<case>.in.yaml and compares the result
// with testdata/<case>.out.yaml; -update rewrites the .out.yaml files.
func TestTranslateGolden(t *testing.T) {
	cases := translationCases(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Translate(snapshotOf(tc.objects...), tc.naming, testOwnership, tc.opts)
			checkConsul115Validation(t, d)
			checkGoldenFile(t, filepath.Join("testdata", tc.name+".out.yaml"), goldenForm(t, d), "TestTranslateGolden")
		})
	}
	// An output without its input is left over from a case that is gone.
	outs, err := filepath.Glob(filepath.Join("testdata", "*.out.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range outs {
		name := strings.TrimSuffix(filepath.Base(out), ".out.yaml")
		if !slices.ContainsFunc(cases, func(tc translationCase) bool { return tc.name == name }) {
			t.Errorf("%s has no %s.in.yaml", out, name)
		}
	}
}

// checkGoldenFile compares got with the golden file at path, line by line (a reader
// sees the lines that differ, between the lines around them); with -update it writes
// got there instead. test names the test that writes it.
func checkGoldenFile(t *testing.T, path string, got []byte, test string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./consul/translate -run %s -update writes it)", err, test)
	}
	if diff := gocmp.Diff(strings.Split(string(want), "\n"), strings.Split(string(got), "\n")); diff != "" {
		t.Errorf("%s differs from what the translation gives (-want +got):\n%s", path, diff)
	}
}
