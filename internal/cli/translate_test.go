package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/deploy"
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

// TestTranslateGolden runs the command on each case, with the flags its heading
// comment names ("# flags: ..."), and compares what it prints with the case's
// .out.yaml; it must exit 0, or with the code the heading names ("# exit: 1", a case
// with refused objects). go test ./internal/cli -run TestTranslateGolden -update
// rewrites them.
func TestTranslateGolden(t *testing.T) {
	for in, out := range goldenCases(t) {
		t.Run(filepath.Base(in), func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			flags, wantCode := goldenHeading(t, string(data))
			args := append([]string{"-f", in}, flags...)
			var stdout, stderr bytes.Buffer
			if code := Translate(args, nil, &stdout, &stderr); code != wantCode {
				t.Fatalf("translate %v: exit %d, want %d: %s", args, code, wantCode, stderr.String())
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

// goldenHeading reads the flags ("# flags: ...") and the exit code ("# exit: N",
// default 0) that the leading comment lines of a golden case name.
func goldenHeading(t *testing.T, data string) (flags []string, code int) {
	t.Helper()
	for line := range strings.Lines(data) {
		if !strings.HasPrefix(line, "#") {
			break
		}
		if rest, ok := strings.CutPrefix(line, "# flags:"); ok {
			flags = append(flags, strings.Fields(rest)...)
		}
		if rest, ok := strings.CutPrefix(line, "# exit:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(rest))
			if err != nil {
				t.Fatalf("heading %q: %v", line, err)
			}
			code = n
		}
	}
	return flags, code
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
		{"unknown field of a core kind", "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {nonsense: []}\n", nil, 1, []string{"document 1", "nonsense"}},
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

// TestTranslateRefusesWhatTheCRDsRefuse: each object its CRD refuses (its schema, a
// CEL rule, a field the standard channel does not serve) is refused on its own, with
// the API server's answer naming it and the field or rule, on stderr and in the
// output's refused list; it is not judged and gets no entry. The valid objects beside
// it are judged and translated, and the exit code is 1, as kubectl apply's.
func TestTranslateRefusesWhatTheCRDsRefuse(t *testing.T) {
	const in = "testdata/admission.in.yaml"
	var stdout, stderr bytes.Buffer
	if code := Translate([]string{"-f", in, "-o", "json"}, nil, &stdout, &stderr); code != 1 {
		t.Errorf("exit %d, want 1; stderr: %s", code, stderr.String())
	}
	var result Result
	if err := json.Unmarshal(stdout.Bytes(), &result); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	// The API server's words (kube-apiserver v1.37.2 with the CRDs of deploy.CRDs).
	want := []Refusal{
		{Kind: "Gateway", Namespace: "demo", Name: "port-zero", Source: in + ", document 3",
			Message: `Gateway.gateway.networking.k8s.io "port-zero" is invalid: spec.listeners[0].port: Invalid value: 0: spec.listeners[0].port in body should be greater than or equal to 1`},
		{Kind: "HTTPRoute", Namespace: "demo", Name: "redirect-and-backend", Source: in + ", document 6",
			Message: `HTTPRoute.gateway.networking.k8s.io "redirect-and-backend" is invalid: spec.rules[0]: Invalid value: RequestRedirect filter must not be used together with backendRefs`},
		{Kind: "HTTPRoute", Namespace: "demo", Name: "experimental", Source: in + ", document 7",
			Message: `HTTPRoute in version "v1" cannot be handled as a HTTPRoute: strict decoding error: unknown field "spec.rules[0].retry"`},
	}
	if diff := gocmp.Diff(want, result.Refused); diff != "" {
		t.Errorf("refused (-want +got):\n%s", diff)
	}
	for _, r := range want {
		if line := r.Source + ": refused as the API server refuses it: " + r.Message; !strings.Contains(stderr.String(), line) {
			t.Errorf("stderr does not say %q:\n%s", line, stderr.String())
		}
		for _, o := range result.Objects {
			if o.Name == r.Name {
				t.Errorf("%s %s is refused, yet judged: %+v", r.Kind, r.Name, o)
			}
		}
	}
	var entries []string
	for _, raw := range result.Entries {
		entry, err := consulapi.DecodeConfigEntryFromJSON(raw)
		if err != nil {
			t.Fatalf("entry %s: %v", raw, err)
		}
		entries = append(entries, entry.GetKind()+" "+entry.GetMeta()["k8s-name"])
	}
	if diff := gocmp.Diff([]string{"api-gateway edge", "http-route echo"}, entries); diff != "" {
		t.Errorf("entries by kind and object (-want +got):\n%s", diff)
	}
}

// TestCRDsServeTheKindsTranslateReads: the CRDs built in serve every custom kind
// translate reads, in the versions it reads, and each builds its validator (CEL rules
// compiled) without error.
func TestCRDsServeTheKindsTranslateReads(t *testing.T) {
	const gw = "gateway.networking.k8s.io"
	for _, gvk := range []schema.GroupVersionKind{
		{Group: gw, Version: "v1", Kind: "GatewayClass"}, {Group: gw, Version: "v1beta1", Kind: "GatewayClass"},
		{Group: gw, Version: "v1", Kind: "Gateway"}, {Group: gw, Version: "v1beta1", Kind: "Gateway"},
		{Group: gw, Version: "v1", Kind: "ListenerSet"},
		{Group: gw, Version: "v1", Kind: "HTTPRoute"}, {Group: gw, Version: "v1beta1", Kind: "HTTPRoute"},
		{Group: gw, Version: "v1", Kind: "GRPCRoute"}, {Group: gw, Version: "v1", Kind: "TCPRoute"},
		{Group: gw, Version: "v1", Kind: "TLSRoute"}, {Group: gw, Version: "v1", Kind: "UDPRoute"},
		{Group: gw, Version: "v1", Kind: "ReferenceGrant"}, {Group: gw, Version: "v1beta1", Kind: "ReferenceGrant"},
		v1alpha1.SchemeGroupVersion.WithKind("GatewayConfig"),
	} {
		version, ok, err := servedCRD(gvk)
		if err != nil || !ok {
			t.Errorf("no CRD built in serves %s (%v)", gvk, err)
			continue
		}
		if _, err := version.validator(); err != nil {
			t.Errorf("%s: %v", gvk, err)
		}
	}
}

// TestCRDsAreFoundByTheirKinds: servedCRD finds every kind and version the CRDs
// built in serve, each in its own file; a file named otherwise would leave its kinds
// unvalidated.
func TestCRDsAreFoundByTheirKinds(t *testing.T) {
	crds := 0
	err := fs.WalkDir(deploy.CRDs, ".", func(file string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		index := map[schema.GroupVersionKind]*crdVersion{}
		if err := indexCRDFile(deploy.CRDs, file, index); err != nil {
			return err
		}
		for gvk := range index {
			crds++
			if !strings.HasPrefix(path.Base(file), crdFilePrefix(gvk)) {
				t.Errorf("%s serves %s, which servedCRD looks for in files beginning %s", file, gvk, crdFilePrefix(gvk))
			}
			if _, ok, err := servedCRD(gvk); err != nil || !ok {
				t.Errorf("servedCRD does not find %s of %s (%v)", gvk, file, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if crds < 14 {
		t.Errorf("the CRDs built in serve %d kinds and versions, want the 14 the Gateway API and this project serve and more", crds)
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
	objects, refused, err := readObjects([]string{in}, nil)
	if err != nil || len(refused) > 0 {
		t.Fatal(err, refused)
	}
	for _, obj := range objects {
		if s, ok := obj.(*corev1.Secret); ok {
			return string(s.Data[corev1.TLSPrivateKeyKey])
		}
	}
	t.Fatalf("%s holds no Secret", in)
	return ""
}
