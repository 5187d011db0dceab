package translate

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/fuzzgen"
	gwdecision "github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

// The seed corpora of the translation fuzz targets (their f.Add seeds and
// testdata/fuzz/<target> files), translated as each target translates them, are kept
// in testdata/fuzzseeds/<target>.out.yaml: TestFuzzSeedTranslations holds the files to
// the translation (-update rewrites them), and test/integration's
// TestFuzzSeedEntriesConsulAccepts writes every entry of them to a real Consul 1.15,
// which must take and accept each. The fuzz targets check their translations against
// the hand-written model of Consul's validation (checkConsul115Validation); this
// checks the model against Consul itself, seed by seed.

// fuzzTranslateInput is one input of FuzzTranslate.
type fuzzTranslateInput struct {
	data       []byte
	host, path string
}

// fuzzTranslateSeeds are FuzzTranslate's f.Add seeds.
func fuzzTranslateSeeds() []fuzzTranslateInput {
	seeds := []fuzzTranslateInput{
		{[]byte{}, "", ""},
		// A route on two listeners of different hostnames, a dropped rule, a rewrite.
		{[]byte{1, 1, 0, 5, 0, 1, 2, 3, 0, 2, 0, 0, 3, 1, 4, 2, 2, 3, 1, 3, 0, 1, 2, 1, 0, 0, 2, 2, 1, 3, 0, 0, 0, 1}, "a.example.com", "/a"},
		{[]byte("\x03\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10"), "*.example.com", "/a/b"},
		{[]byte("ListenerSets and wildcard hostnames and rewrites and everything else"), "x.badexample.com", "/"},
	}
	for _, seed := range fuzzgen.Seeds(64) {
		seeds = append(seeds, fuzzTranslateInput{seed, "", ""})
	}
	return seeds
}

// fuzzTranslatorSeeds are FuzzTranslator's f.Add seeds: before, after and mix.
func fuzzTranslatorSeeds() [][3][]byte {
	out := [][3][]byte{{{}, {}, {}}}
	seeds := fuzzgen.Seeds(24)
	for i := 0; i+2 < len(seeds); i += 3 {
		out = append(out, [3][]byte{seeds[i], seeds[i+1], seeds[i+2]})
	}
	return out
}

// fuzzHostnamesInput is one input of FuzzRouteHostnames.
type fuzzHostnamesInput struct {
	data []byte
	host string
}

// fuzzRouteHostnamesSeeds are FuzzRouteHostnames' f.Add seeds.
func fuzzRouteHostnamesSeeds() []fuzzHostnamesInput {
	seeds := []fuzzHostnamesInput{
		{[]byte{}, ""},
		{[]byte{2, 0, 6, 3, 1, 3, 1, 7}, ""},
		{[]byte{3, 3, 1, 3, 2, 1, 0, 1, 3, 1, 2}, "example.com"},
	}
	for _, seed := range fuzzgen.Seeds(16) {
		seeds = append(seeds, fuzzHostnamesInput{seed, ""})
	}
	return seeds
}

// fuzzNamesInput is one input of FuzzEntryNames: a prefix and two objects.
type fuzzNamesInput struct {
	prefix, ns1, name1, ns2, name2 string
}

// fuzzEntryNamesSeeds are FuzzEntryNames' f.Add seeds.
func fuzzEntryNamesSeeds() []fuzzNamesInput {
	var seeds []fuzzNamesInput
	for _, prefix := range namingPrefixes {
		seeds = append(seeds,
			fuzzNamesInput{prefix, "a", "b.c", "b", "c.a"},
			fuzzNamesInput{prefix, "a", "b", "a", "secret.b"},
			fuzzNamesInput{prefix, "a-b", "c", "b", "c.a-b"})
	}
	return seeds
}

// seedTranslation is one seed of a fuzz target and what the translation makes of it.
type seedTranslation struct {
	seed    string
	desired Desired
}

// fuzzSeedTranslations translates the seed corpus of each translation fuzz target as
// the target does, by target.
func fuzzSeedTranslations(t *testing.T) map[string][]seedTranslation {
	t.Helper()
	out := map[string][]seedTranslation{}
	for i, s := range fuzzTranslateSeeds() {
		out["FuzzTranslate"] = append(out["FuzzTranslate"], seedTranslation{fmt.Sprintf("f.Add %d", i), translateFuzzCase(s)})
	}
	for _, c := range readFuzzCorpus(t, "FuzzTranslate") {
		s := fuzzTranslateInput{c.bytes(t, 0), c.string(t, 1), c.string(t, 2)}
		out["FuzzTranslate"] = append(out["FuzzTranslate"], seedTranslation{"testdata/fuzz " + c.name, translateFuzzCase(s)})
	}
	for i, s := range fuzzTranslatorSeeds() {
		before, mixed := translatorFuzzCase(s[0], s[1], s[2])
		out["FuzzTranslator"] = append(out["FuzzTranslator"],
			seedTranslation{fmt.Sprintf("f.Add %d, before", i), before},
			seedTranslation{fmt.Sprintf("f.Add %d, mixed", i), mixed})
	}
	for i, s := range fuzzRouteHostnamesSeeds() {
		out["FuzzRouteHostnames"] = append(out["FuzzRouteHostnames"], seedTranslation{fmt.Sprintf("f.Add %d", i), routeHostnamesFuzzCase(s)})
	}
	for i, s := range fuzzEntryNamesSeeds() {
		if !validObject(s.ns1, s.name1) || !validObject(s.ns2, s.name2) {
			continue // the target skips it too
		}
		out["FuzzEntryNames"] = append(out["FuzzEntryNames"], seedTranslation{fmt.Sprintf("f.Add %d", i), entryNamesFuzzCase(s)})
	}
	for _, target := range []string{"FuzzTranslator", "FuzzRouteHostnames", "FuzzEntryNames"} {
		if len(readFuzzCorpus(t, target)) > 0 {
			t.Fatalf("testdata/fuzz/%s holds inputs fuzzSeedTranslations does not read yet", target)
		}
	}
	return out
}

// translateFuzzCase is FuzzTranslate's translation of one input.
func translateFuzzCase(s fuzzTranslateInput) Desired {
	c := newFuzzCase(fuzzgen.New(s.data, s.host, s.path))
	return Translate(snapshotOf(c.objects...), c.naming, testOwnership, c.opts)
}

// translatorFuzzCase is FuzzTranslator's two translations of one input: the first
// snapshot, and the snapshot mixed of both that the Translator translates next.
func translatorFuzzCase(before, after, mix []byte) (first, mixed Desired) {
	a := newFuzzCase(fuzzgen.New(before, "", ""))
	b := newFuzzCase(fuzzgen.New(after, "", ""))
	s := mixedSnapshot(snapshotOf(a.objects...), snapshotOf(b.objects...), fuzzgen.New(mix, "", ""))
	return Translate(snapshotOf(a.objects...), a.naming, testOwnership, a.opts), Translate(s, a.naming, testOwnership, a.opts)
}

// routeHostnamesFuzzCase translates what FuzzRouteHostnames judges: a Gateway infra/gw
// whose listeners are the parents' members, each Consul listener a port of its own,
// and an HTTPRoute apps/r with the route hostnames, attached to every member, whose
// one rule sends to web:8080.
func routeHostnamesFuzzCase(s fuzzHostnamesInput) Desired {
	in := fuzzgen.New(s.data, s.host, "")
	hostnames := in.RouteHostnames()
	parents := fuzzParents(in)
	var listeners []judgedListener
	a := gwdecision.Attachment{Gateway: fuzzGateway}
	for i, p := range parents {
		for _, m := range p.members {
			listeners = append(listeners, validListener(httpListener(string(m.name), 8080+int32(i), m.hostname)))
			a.Listeners = append(a.Listeners, m.name)
		}
	}
	route := newConfirmedHTTPRoute("apps", "r", nil, attachedTo(a), gatewayv1.HTTPRouteRule{
		BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "web", 8080, nil)},
	})
	route.Route.Spec.Hostnames = hostnames
	gw := confirmedGateway(fuzzGateway.Namespace, fuzzGateway.Name, true, listeners...)
	return Translate(snapshotOf(gw, route), Naming{}, testOwnership, Options{})
}

// entryNamesFuzzCase translates objects of the names FuzzEntryNames judges: a Gateway
// ns1/name1 whose HTTPS listener serves the Secret ns2/name2, and an HTTPRoute
// ns2/name2 on it, under the seed's prefix: an api-gateway, an inline-certificate and
// an http-route of those names.
func entryNamesFuzzCase(s fuzzNamesInput) Desired {
	gw := confirmedGateway(s.ns1, s.name1, true, validListener(httpsListener("https", 443, "", certRef(s.ns2, s.name2))))
	route := newConfirmedHTTPRoute(s.ns2, s.name2, nil, attachedTo(attachment(s.ns1, s.name1, "https")), gatewayv1.HTTPRouteRule{
		BackendRefs: []gatewayv1.HTTPBackendRef{httpBackend("", "web", 8080, nil)},
	})
	return Translate(snapshotOf(gw, tlsSecret(s.ns2, s.name2), route), Naming{Prefix: s.prefix}, testOwnership, Options{})
}

// fuzzCorpusEntry is one file of testdata/fuzz/<target>: its values in order.
type fuzzCorpusEntry struct {
	name   string
	values []string // each []byte or string value, unquoted
	kinds  []string // "[]byte" or "string", per value
}

func (c fuzzCorpusEntry) bytes(t *testing.T, i int) []byte {
	t.Helper()
	if i >= len(c.values) || c.kinds[i] != "[]byte" {
		t.Fatalf("testdata/fuzz %s: value %d is not []byte", c.name, i)
	}
	return []byte(c.values[i])
}

func (c fuzzCorpusEntry) string(t *testing.T, i int) string {
	t.Helper()
	if i >= len(c.values) || c.kinds[i] != "string" {
		t.Fatalf("testdata/fuzz %s: value %d is not a string", c.name, i)
	}
	return c.values[i]
}

// readFuzzCorpus reads testdata/fuzz/<target>, the files go test -fuzz keeps: a
// "go test fuzz v1" line, then one Go expression per value, []byte("...") or
// string("...").
func readFuzzCorpus(t *testing.T, target string) []fuzzCorpusEntry {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", target, "*"))
	if err != nil {
		t.Fatal(err)
	}
	var out []fuzzCorpusEntry
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if lines[0] != "go test fuzz v1" {
			t.Fatalf("%s: not a fuzz corpus file", file)
		}
		entry := fuzzCorpusEntry{name: filepath.Base(file)}
		for _, line := range lines[1:] {
			kind, value, err := corpusValue(line)
			if err != nil {
				t.Fatalf("%s: %q: %v", file, line, err)
			}
			entry.kinds, entry.values = append(entry.kinds, kind), append(entry.values, value)
		}
		out = append(out, entry)
	}
	return out
}

// corpusValue reads one value line of a fuzz corpus file.
func corpusValue(line string) (kind, value string, err error) {
	expr, err := parser.ParseExpr(line)
	if err != nil {
		return "", "", err
	}
	call, ok := expr.(*ast.CallExpr)
	if !ok || len(call.Args) != 1 {
		return "", "", fmt.Errorf("not a conversion")
	}
	lit, ok := call.Args[0].(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", "", fmt.Errorf("not a string literal")
	}
	switch fun := call.Fun.(type) {
	case *ast.ArrayType:
		kind = "[]byte"
	case *ast.Ident:
		kind = fun.Name
	}
	if kind != "[]byte" && kind != "string" {
		return "", "", fmt.Errorf("a value of a type the translation targets do not take")
	}
	value, err = strconv.Unquote(lit.Value)
	return kind, value, err
}

// seedFile is testdata/fuzzseeds/<target>.out.yaml: each seed with its translation,
// in goldenForm's terms.
type seedFile struct {
	Seeds []seedForm
}

type seedForm struct {
	Seed string
	goldenTranslation
}

// TestFuzzSeedTranslations: testdata/fuzzseeds holds the translation of every seed of
// the translation fuzz targets, as each target translates it, and the model of
// Consul's validation accepts each (FuzzTranslate checks that too); -update rewrites
// the files. test/integration writes their entries to a real Consul.
func TestFuzzSeedTranslations(t *testing.T) {
	all := fuzzSeedTranslations(t)
	for _, target := range []string{"FuzzTranslate", "FuzzTranslator", "FuzzRouteHostnames", "FuzzEntryNames"} {
		t.Run(target, func(t *testing.T) {
			seeds := all[target]
			if len(seeds) == 0 {
				t.Fatalf("no seeds of %s translated", target)
			}
			var file seedFile
			for _, s := range seeds {
				t.Run(s.seed, func(t *testing.T) { checkConsul115Validation(t, s.desired) })
				file.Seeds = append(file.Seeds, seedForm{Seed: s.seed, goldenTranslation: goldenOf(s.desired)})
			}
			checkGoldenFile(t, filepath.Join("testdata", "fuzzseeds", target+".out.yaml"), seedFileBytes(t, file), "TestFuzzSeedTranslations")
		})
	}
}

func seedFileBytes(t *testing.T, file seedFile) []byte {
	t.Helper()
	b, err := json.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	y, err := yaml.JSONToYAML(b)
	if err != nil {
		t.Fatal(err)
	}
	return y
}
