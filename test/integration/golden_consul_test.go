package integration

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"sigs.k8s.io/yaml"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// goldenEntries is what a translation golden file (consul/translate/testdata) holds of
// the entries: each with its key.
type goldenEntries struct {
	Entries []struct {
		Entry     json.RawMessage `json:"Entry"`
		Namespace string          `json:"Namespace"`
		Partition string          `json:"Partition"`
	} `json:"Entries"`
}

// writeOrder puts entries in the order Consul needs them: what others refer to first.
var writeOrder = []string{
	consulapi.InlineCertificate, consulapi.ServiceDefaults, consulapi.ServiceResolver,
	consulapi.APIGateway, consulapi.HTTPRoute, consulapi.TCPRoute,
}

// TestGoldenEntriesConsulAccepts writes the entries of each translation golden file
// to a Consul 1.15 of its own, with service-defaults of protocol http for the HTTP
// backends the case leaves to their owners (as an operator or consul-k8s would have
// them): Consul must take every write and accept every api-gateway and route entry.
// The golden files are checked otherwise only against the hand-written model of
// Consul's validation (consul/translate's consul115_test.go). Cases with Consul
// Enterprise namespaces or partitions are left out: this Consul has neither.
func TestGoldenEntriesConsulAccepts(t *testing.T) {
	_, admin := testenv.StartConsulFor(t, env.LogDir(), testenv.ConsulOptions{})
	files, err := filepath.Glob(filepath.Join("..", "..", "consul", "translate", "testdata", "*.out.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("golden files: %v (%v)", files, err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".out.yaml"), func(t *testing.T) {
			entries, enterprise := readGoldenEntries(t, file)
			if enterprise {
				t.Skip("Consul Enterprise namespaces or partitions")
			}
			writeGoldenEntries(t, admin, entries)
			testenv.Eventually(t, 30*time.Second, "Consul accepts every api-gateway and route entry", func(ctx context.Context) error {
				return goldenVerdicts(ctx, admin, entries)
			})
		})
	}
}

// fuzzSeedTargets are the translation fuzz targets whose seeds' translations
// consul/translate keeps in testdata/fuzzseeds (TestFuzzSeedTranslations).
var fuzzSeedTargets = []string{"FuzzTranslate", "FuzzTranslator", "FuzzRouteHostnames", "FuzzEntryNames"}

// TestFuzzSeedEntriesConsulAccepts writes the entries of every seed translation of the
// translation fuzz targets (consul/translate/testdata/fuzzseeds, each seed translated
// as its target translates it, and accepted by the hand-written model of Consul's
// validation there) to a Consul 1.15 of its own, seed by seed, as
// TestGoldenEntriesConsulAccepts writes the golden files': Consul must take every write
// and accept every api-gateway and route entry. Seeds whose entries are in Consul
// Enterprise namespaces (a mirroring naming) are left out; each target must have
// seeds checked.
func TestFuzzSeedEntriesConsulAccepts(t *testing.T) {
	_, admin := testenv.StartConsulFor(t, env.LogDir(), testenv.ConsulOptions{})
	for _, target := range fuzzSeedTargets {
		t.Run(target, func(t *testing.T) {
			file := filepath.Join("..", "..", "consul", "translate", "testdata", "fuzzseeds", target+".out.yaml")
			var seeds struct {
				Seeds []struct {
					Seed string
					goldenEntries
				}
			}
			readGoldenFile(t, file, &seeds)
			checked, enterprise := 0, 0
			for _, seed := range seeds.Seeds {
				entries, inNamespaces := decodeGoldenEntries(t, file, seed.goldenEntries)
				if inNamespaces {
					enterprise++
					continue
				}
				t.Run(seed.Seed, func(t *testing.T) {
					writeGoldenEntries(t, admin, entries)
					testenv.Eventually(t, 30*time.Second, "Consul accepts every api-gateway and route entry", func(ctx context.Context) error {
						return goldenVerdicts(ctx, admin, entries)
					})
				})
				checked++
			}
			t.Logf("%s: %d seeds' entries written to Consul, %d left out (Consul Enterprise namespaces)", target, checked, enterprise)
			if checked == 0 {
				t.Errorf("%s: no seed checked of %d", target, len(seeds.Seeds))
			}
		})
	}
}

func readGoldenEntries(t *testing.T, file string) (entries []consulapi.ConfigEntry, enterprise bool) {
	t.Helper()
	var golden goldenEntries
	readGoldenFile(t, file, &golden)
	return decodeGoldenEntries(t, file, golden)
}

// readGoldenFile reads a YAML file of consul/translate/testdata into into.
func readGoldenFile(t *testing.T, file string, into any) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	data, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// decodeGoldenEntries decodes the entries of a golden translation, in writeOrder, and
// says whether any is in a Consul Enterprise namespace or partition.
func decodeGoldenEntries(t *testing.T, file string, golden goldenEntries) (entries []consulapi.ConfigEntry, enterprise bool) {
	t.Helper()
	for _, e := range golden.Entries {
		if e.Namespace != "" || e.Partition != "" {
			enterprise = true
		}
		entry, err := consulapi.DecodeConfigEntryFromJSON(e.Entry)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		entries = append(entries, entry)
	}
	slices.SortStableFunc(entries, func(a, b consulapi.ConfigEntry) int {
		return kindRank(a) - kindRank(b)
	})
	return entries, enterprise
}

// kindRank orders entries by writeOrder, and a resolver that redirects after the
// resolvers that define subsets it may redirect to.
func kindRank(e consulapi.ConfigEntry) int {
	i := slices.Index(writeOrder, e.GetKind())
	if i < 0 {
		i = len(writeOrder)
	}
	rank := 2 * i
	if r, ok := e.(*consulapi.ServiceResolverConfigEntry); ok && r.Redirect != nil {
		rank++
	}
	return rank
}

// writeGoldenEntries writes the case's entries, with a real certificate in place of
// the golden files' placeholders, and service-defaults of protocol http for the HTTP
// backends it has none for, as the controller encodes entries; all are deleted when t
// ends, routes first.
func writeGoldenEntries(t *testing.T, admin *consulapi.Client, entries []consulapi.ConfigEntry) {
	t.Helper()
	// protocols are the services' protocols: the case's service-defaults', http for
	// an http-route's backend; resolvers redirect within one protocol.
	protocols := map[string]string{}
	declared := map[string]bool{}
	var resolvers []*consulapi.ServiceResolverConfigEntry
	for _, e := range entries {
		switch e := e.(type) {
		case *consulapi.ServiceConfigEntry:
			declared[e.Name], protocols[e.Name] = true, e.Protocol
		case *consulapi.HTTPRouteConfigEntry:
			for _, rule := range e.Rules {
				for _, svc := range rule.Services {
					protocols[svc.Name] = "http"
				}
			}
		case *consulapi.ServiceResolverConfigEntry:
			resolvers = append(resolvers, e)
		case *consulapi.InlineCertificateConfigEntry:
			// The golden files carry placeholders; Consul parses what it is given.
			cert, key := testenv.SelfSigned(t, "golden.example.com")
			e.Certificate, e.PrivateKey = string(cert), string(key)
		}
	}
	// A narrowed backend's resolver redirects to the service itself: one chain, one
	// protocol, tcp unless the case says otherwise.
	for _, r := range resolvers {
		if r.Redirect != nil && r.Redirect.Service != "" && protocols[r.Redirect.Service] == "" {
			protocols[r.Redirect.Service] = cmp.Or(protocols[r.Name], "tcp")
		}
	}
	var written []consulapi.ConfigEntry
	for _, name := range slices.Sorted(maps.Keys(protocols)) {
		if !declared[name] {
			written = append(written, &consulapi.ServiceConfigEntry{Kind: consulapi.ServiceDefaults, Name: name, Protocol: protocols[name]})
		}
	}
	written = append(written, entries...)
	t.Cleanup(func() {
		for _, e := range slices.Backward(written) {
			if _, err := admin.ConfigEntries().Delete(e.GetKind(), e.GetName(), nil); err != nil {
				t.Errorf("delete %s %s: %v", e.GetKind(), e.GetName(), err)
			}
		}
	})
	for _, e := range written {
		if ok, _, err := admin.ConfigEntries().Set(consul.Compact(e), nil); err != nil || !ok {
			t.Fatalf("Consul refused the write of %s %s: %v", e.GetKind(), e.GetName(), err)
		}
	}
}

// goldenVerdicts reports the api-gateway and route entries Consul has not accepted.
func goldenVerdicts(ctx context.Context, admin *consulapi.Client, entries []consulapi.ConfigEntry) error {
	var problems []string
	for _, e := range entries {
		switch e.GetKind() {
		case consulapi.APIGateway, consulapi.HTTPRoute, consulapi.TCPRoute:
		default:
			continue
		}
		held, _, err := admin.ConfigEntries().Get(e.GetKind(), e.GetName(), (&consulapi.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return err
		}
		judged := consul.AcceptedCondition(held)
		switch {
		case judged == nil:
			problems = append(problems, fmt.Sprintf("%s %s: not judged yet", e.GetKind(), e.GetName()))
		case judged.Status != consulapi.ConditionStatusTrue:
			problems = append(problems, fmt.Sprintf("%s %s: Accepted=%s(%s) %s", e.GetKind(), e.GetName(), judged.Status, judged.Reason, judged.Message))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}
