package testenv

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

func TestMissingBinaryNamesTheMakeTarget(t *testing.T) {
	_, err := binary("no-such-server")
	if err == nil {
		t.Fatal("binary() found a server that does not exist")
	}
	if !strings.Contains(err.Error(), "make tools") {
		t.Errorf("error %q does not tell the reader to run `make tools`", err)
	}
}

// TestToolVersions checks that every go.mod that builds a server or tool requires the
// version tools/versions.mk pins, so the one place that records them stays true.
func TestToolVersions(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	pins := readVersions(t, filepath.Join(root, "tools", "versions.mk"))
	tests := []struct {
		gomod, module, pin string
	}{
		{"tools/kube/go.mod", "k8s.io/kubernetes", "KUBERNETES_VERSION"},
		{"tools/kube/go.mod", "go.etcd.io/etcd/server/v3", "ETCD_VERSION"},
		{"tools/kwok/go.mod", "sigs.k8s.io/kwok", "KWOK_VERSION"},
		{"tools/consul/go.mod", "github.com/hashicorp/consul", "CONSUL_VERSION"},
		{"tools/consul/go.mod", "github.com/hashicorp/consul/api", "CONSUL_SERVER_API_VERSION"},
		{"tools/lint/go.mod", "github.com/golangci/golangci-lint/v2", "GOLANGCI_LINT_VERSION"},
		{"tools/codegen/go.mod", "sigs.k8s.io/controller-tools", "CONTROLLER_TOOLS_VERSION"},
		{"tools/image/go.mod", "github.com/google/go-containerregistry", "GO_CONTAINERREGISTRY_VERSION"},
		{"tools/helm/go.mod", "helm.sh/helm/v4", "HELM_VERSION"},
		{"go.mod", "sigs.k8s.io/gateway-api", "GATEWAY_API_VERSION"},
		{"go.mod", "k8s.io/client-go", "KUBE_STAGING_VERSION"},
	}
	for _, tt := range tests {
		t.Run(tt.gomod+"/"+tt.module, func(t *testing.T) {
			f := readModFile(t, filepath.Join(root, tt.gomod))
			if got, want := required(f, tt.module), pins[tt.pin]; got != want {
				t.Errorf("%s requires %s %q, tools/versions.mk pins %s=%q", tt.gomod, tt.module, got, tt.pin, want)
			}
		})
	}
	t.Run("tools/kube/go.mod staging replaces", func(t *testing.T) {
		f := readModFile(t, filepath.Join(root, "tools", "kube", "go.mod"))
		if len(f.Replace) == 0 {
			t.Fatal("no replace directives for the k8s.io staging modules")
		}
		for _, r := range f.Replace {
			if r.New.Path != r.Old.Path || r.New.Version != pins["KUBE_STAGING_VERSION"] {
				t.Errorf("replace %s => %s %s, want the same module at %s", r.Old.Path, r.New.Path, r.New.Version, pins["KUBE_STAGING_VERSION"])
			}
		}
	})
}

func readVersions(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pins := map[string]string{}
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		name, value, ok := strings.Cut(scanner.Text(), ":=")
		if ok && !strings.HasPrefix(name, "#") {
			pins[strings.TrimSpace(name)] = strings.TrimSpace(value)
		}
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	return pins
}

func readModFile(t *testing.T, path string) *modfile.File {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse(path, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func required(f *modfile.File, module string) string {
	for _, r := range f.Require {
		if r.Mod.Path == module {
			return r.Mod.Version
		}
	}
	return ""
}

// A stopped controller's queue leaves its gauge where it was; a running one of the same
// name sets it to its own figure. Only the latter is work in progress.
func TestUnfinishedWork(t *testing.T) {
	base := "workqueue_unfinished_work_seconds{name=\"consul\"} 0.0027\nworkqueue_unfinished_work_seconds{name=\"gateway\"} 1.5\n"
	for _, tt := range []struct {
		now  string
		want float64
	}{
		{base, 0},
		{"workqueue_unfinished_work_seconds{name=\"consul\"} 0\nworkqueue_unfinished_work_seconds{name=\"gateway\"} 1.5\n", 0},
		{"workqueue_unfinished_work_seconds{name=\"consul\"} 0.25\nworkqueue_unfinished_work_seconds{name=\"gateway\"} 1.5\n", 0.25},
		{base + "workqueue_unfinished_work_seconds{name=\"httproute\"} 0.5\n", 0.5},
	} {
		if got := unfinishedWork(tt.now, base); got != tt.want {
			t.Errorf("unfinishedWork(%q) = %v, want %v", tt.now, got, tt.want)
		}
	}
}
