package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

var update = flag.Bool("update", false, "rewrite testdata/*.out.yaml from the translate command")

// goldenCases are testdata/*.in.yaml, and the repository's examples/gateway.yaml
// (what make run-local applies), with the output each must give.
func goldenCases(t *testing.T) map[string]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "*.in.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{filepath.Join(root, "examples", "gateway.yaml"): filepath.Join("testdata", "example.out.yaml")}
	for _, p := range paths {
		out[p] = strings.TrimSuffix(p, ".in.yaml") + ".out.yaml"
	}
	return out
}

// TestTranslateGolden runs the command on each case, with the flags its first line
// names ("# flags: ..."), and compares what it prints with the case's .out.yaml.
// go test ./internal/cli -run TestTranslateGolden -update rewrites them.
func TestTranslateGolden(t *testing.T) {
	for in, out := range goldenCases(t) {
		t.Run(filepath.Base(in), func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			args := []string{"-f", in}
			if first, _, _ := strings.Cut(string(data), "\n"); strings.HasPrefix(first, "# flags:") {
				args = append(args, strings.Fields(strings.TrimPrefix(first, "# flags:"))...)
			}
			var stdout, stderr bytes.Buffer
			if code := Translate(args, nil, &stdout, &stderr); code != 0 {
				t.Fatalf("translate %v: exit %d: %s", args, code, stderr.String())
			}
			if *update {
				if err := os.WriteFile(out, stdout.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(out)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if diff := gocmp.Diff(string(want), stdout.String()); diff != "" {
				t.Errorf("translate %v (-%s +got):\n%s", args, out, diff)
			}
		})
	}
}

// TestTranslateEntriesAreConsuls: with -o json every entry decodes as the Consul
// config entry of its kind, and the example's route reaches its Service.
func TestTranslateEntriesAreConsuls(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := Translate([]string{"-o", "json", "-f", filepath.Join(root, "examples", "gateway.yaml")}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var result Result
	if err := json.Unmarshal(stdout.Bytes(), &result); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, raw := range result.Entries {
		entry, err := consulapi.DecodeConfigEntryFromJSON(raw)
		if err != nil {
			t.Fatalf("entry %s: %v", raw, err)
		}
		kinds[entry.GetKind()]++
		if route, ok := entry.(*consulapi.HTTPRouteConfigEntry); ok && route.Rules[0].Services[0].Name != "echo" {
			t.Errorf("http-route %s serves %v, want the Service echo", route.Name, route.Rules[0].Services)
		}
	}
	if want := map[string]int{consulapi.APIGateway: 1, consulapi.HTTPRoute: 1}; !gocmp.Equal(want, kinds) {
		t.Errorf("entries by kind %v, want %v", kinds, want)
	}
}

// TestTranslateRefusesBadInput: input it cannot read is an error naming the file and
// the document, with exit code 1; bad flags exit 2.
func TestTranslateRefusesBadInput(t *testing.T) {
	tests := []struct {
		name, input string
		args        []string
		code        int
		says        []string
	}{
		{"unknown kind", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n", nil, 1, []string{"<stdin>", "document 1", "ConfigMap"}},
		{"unknown field", "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: g}\nspec: {gatewayClassName: c, nonsense: []}\n", nil, 1, []string{"document 1", "nonsense"}},
		{"second document", "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\nkind: Nothing\n", nil, 1, []string{"document 2"}},
		{"no name", "apiVersion: v1\nkind: Service\nmetadata: {namespace: a}\n", nil, 1, []string{"metadata.name"}},
		{"bad output", "", []string{"-o", "table"}, 2, []string{"-o table"}},
		{"stray argument", "", []string{"file.yaml"}, 2, []string{"-f"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Translate(tt.args, strings.NewReader(tt.input), &stdout, &stderr)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr: %s", code, tt.code, stderr.String())
			}
			for _, s := range tt.says {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr %q does not say %q", stderr.String(), s)
				}
			}
			if stdout.Len() != 0 {
				t.Errorf("printed %q on an error", stdout.String())
			}
		})
	}
}

// TestTranslateReadsAList: the List kubectl get -o yaml prints translates as its
// items do one by one, and a directory as its files.
func TestTranslateReadsAList(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	example := filepath.Join(root, "examples", "gateway.yaml")
	data, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := documents(data)
	if err != nil {
		t.Fatal(err)
	}
	var items []json.RawMessage
	for _, doc := range docs {
		item, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, item)
	}
	list, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		t.Fatal(err)
	}
	var fromFile, fromList, fromDir, stderr bytes.Buffer
	if code := Translate([]string{"-f", example}, nil, &fromFile, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if code := Translate(nil, bytes.NewReader(list), &fromList, &stderr); code != 0 {
		t.Fatalf("a List: exit %d: %s", code, stderr.String())
	}
	if diff := gocmp.Diff(fromFile.String(), fromList.String()); diff != "" {
		t.Errorf("a List translates otherwise than its items (-items +list):\n%s", diff)
	}
	// A directory is its files (examples/ holds gateway.yaml alone).
	if code := Translate([]string{"-f", filepath.Dir(example)}, nil, &fromDir, &stderr); code != 0 {
		t.Fatalf("a directory: exit %d: %s", code, stderr.String())
	}
	if diff := gocmp.Diff(fromFile.String(), fromDir.String()); diff != "" {
		t.Errorf("a directory translates otherwise than its file (-file +directory):\n%s", diff)
	}
}

// TestTranslateRedactsPrivateKeys: without --show-secrets no output holds a PEM
// private key (the golden files are what translate prints), and with it the
// inline-certificate entry carries the Secret's key as the controller writes it.
func TestTranslateRedactsPrivateKeys(t *testing.T) {
	const in = "testdata/certificate.in.yaml"
	for _, out := range goldenCases(t) {
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), "PRIVATE KEY") {
			t.Errorf("%s holds a private key", out)
		}
	}
	for _, tt := range []struct {
		flags   []string
		wantKey bool
	}{
		{nil, false},
		{[]string{"--show-secrets"}, true},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"-f", in, "-o", "json"}, tt.flags...)
		if code := Translate(args, nil, &stdout, &stderr); code != 0 {
			t.Fatalf("translate %v: exit %d: %s", args, code, stderr.String())
		}
		var result struct {
			Entries []consulapi.InlineCertificateConfigEntry
		}
		if err := json.Unmarshal(stdout.Bytes(), &result); err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, e := range result.Entries {
			if e.Kind == consulapi.InlineCertificate {
				keys = append(keys, e.PrivateKey)
			}
		}
		want := []string{redactedPrivateKey}
		if tt.wantKey {
			want = []string{secretKey(t, in)}
		}
		if diff := gocmp.Diff(want, keys); diff != "" {
			t.Errorf("translate %v: private keys of the inline-certificates (-want +got):\n%s", args, diff)
		}
	}
}

// secretKey is the tls.key of the one Secret of the file in.
func secretKey(t *testing.T, in string) string {
	t.Helper()
	objects, err := readObjects([]string{in}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objects {
		if s, ok := obj.(*corev1.Secret); ok {
			return string(s.Data[corev1.TLSPrivateKeyKey])
		}
	}
	t.Fatalf("%s holds no Secret", in)
	return ""
}
