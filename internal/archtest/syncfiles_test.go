package archtest

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// syncWorkerFiles are the files of package sync that act: the status workers, with
// their queues and event handlers (controller.go), one sync per kind (sync.go), the
// status writes and what is published (write.go) and the Events (recorder.go). Every
// other file of sync decides: it reads the caches handed to it and returns a status,
// a condition, a decision or a wait (workqueue.Expected), and acts on nothing.
var syncWorkerFiles = []string{"sync/controller.go", "sync/sync.go", "sync/write.go", "sync/recorder.go"}

// actingImports are what only a worker file of sync may import (a path, or a prefix
// ending in "/"): clients, informers, queues, Events, metrics, logs and contexts.
var actingImports = []string{
	"context", "k8s.io/klog/v2",
	"k8s.io/client-go/kubernetes", "k8s.io/client-go/kubernetes/", "k8s.io/client-go/informers/",
	"k8s.io/client-go/util/workqueue", "k8s.io/client-go/tools/events", "k8s.io/client-go/tools/record",
	"sigs.k8s.io/gateway-api/pkg/client/clientset/", "sigs.k8s.io/gateway-api/pkg/client/informers/",
	"github.com/prometheus/",
}

// deciderNames are the names a decision file of sync may take from a module package
// that acts: a wait is returned, never queued.
var deciderNames = map[string][]string{
	"workqueue":        {"Expected"},
	"internal/metrics": {},
}

func TestSyncDecisionsActOnNothing(t *testing.T) {
	g, _ := load(t)
	p, ok := g.pkgs["sync"]
	if !ok {
		t.Fatal("package sync is gone: mend syncWorkerFiles and docs/architecture.md")
	}
	for _, f := range syncWorkerFiles {
		if !slices.Contains(p.files, f) {
			t.Errorf("worker file %s is gone: mend syncWorkerFiles and sync/doc.go", f)
		}
	}
	for _, imp := range sortedKeys(p.imports) {
		for _, pos := range p.imports[imp] {
			file := filepath.ToSlash(relTo(g.root, pos.Filename))
			if !slices.Contains(syncWorkerFiles, file) && actingImport(imp) {
				t.Errorf("%s imports %s, but only sync's worker files act (%s); a decision reads caches and returns what it decided",
					position(g.root, pos), imp, strings.Join(syncWorkerFiles, ", "))
			}
		}
	}
	for _, use := range actingNamesInDecisions(t, g, p) {
		t.Errorf("%s, but a decision of sync acts on nothing: it returns a wait instead", use)
	}
}

func actingImport(imp string) bool {
	return slices.ContainsFunc(actingImports, func(f string) bool {
		return imp == f || (strings.HasSuffix(f, "/") && strings.HasPrefix(imp, f))
	})
}

// actingNamesInDecisions names each use, in a decision file of sync, of a name of
// deciderNames' packages other than the allowed ones.
func actingNamesInDecisions(t *testing.T, g *graph, p *pkg) []string {
	t.Helper()
	decisions := slices.DeleteFunc(slices.Clone(p.files), func(file string) bool { return slices.Contains(syncWorkerFiles, file) })
	var uses []string
	for _, use := range importedNameUses(t, g.root, decisions) {
		rel, ok := g.relOf(use.imp)
		if !ok {
			continue
		}
		if allowed, ok := deciderNames[rel]; ok && !slices.Contains(allowed, use.name) {
			use.imp = rel
			uses = append(uses, use.String())
		}
	}
	return uses
}

// relTo is path relative to root, or path itself when it is not under root.
func relTo(root, path string) string {
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return path
	}
	return rel
}
