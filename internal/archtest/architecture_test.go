// Package archtest holds the picture of the code in docs/architecture.json (the parts,
// the arrows between them and the arrows that must never be) against the import graph
// of the module's non-test packages, and keeps the pure packages free of clients and
// clocks. docs/architecture.md explains the picture; this test keeps it true. It also
// keeps built binaries out of the repository.
package archtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// picturePath is the picture, relative to the module root.
const picturePath = "docs/architecture.json"

// wiringPart may import every part: main wires them all, so its arrows are not drawn
// (those it does draw must still exist).
const wiringPart = "Main"

// knownException begins the words of a drawn arrow that breaks a rule on purpose, for
// a reason the rest of its words give; docs/architecture.md lists each one.
const knownException = "known exception"

// maxSays is the longest description of a part the picture draws on one line.
const maxSays = 60

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] > 0x7e || s[i] < 0x20 {
			return false
		}
	}
	return true
}

// testOnly are module packages outside test/ that only tests may import.
var testOnly = []string{"internal/fuzzgen", "internal/testcerts"}

// picture is the part of docs/architecture.json this test reads.
type picture struct {
	Parts map[string]struct {
		Is   []string
		Says string
	} `json:"parts"`
	Arrows [][]string `json:"arrows"`
	Never  [][]string `json:"never"`
}

// pkg is one non-test package of the module, by its path from the module root.
type pkg struct {
	rel     string
	files   []string                    // non-test Go files, relative to the module root
	imports map[string][]token.Position // every import path, with where it is imported
}

// edge is one part importing another.
type edge struct{ from, to string }

type graph struct {
	module string
	root   string
	pkgs   map[string]*pkg
}

func TestEveryPackageIsOnAPart(t *testing.T) {
	g, pic := load(t)
	for _, p := range g.sortedPkgs() {
		if isTestPackage(p.rel) || slices.Contains(testOnly, p.rel) {
			continue
		}
		part, err := pic.partOf(p)
		if err != nil {
			t.Error(err)
			continue
		}
		if part == "" {
			t.Errorf("package %s is on no part of %s: add it to a part's \"is\" and describe it in docs/architecture.md", p.rel, picturePath)
		}
	}
	for name, part := range pic.Parts {
		// The picture draws each part with its description on one line.
		if len(part.Says) > maxSays || !isASCII(part.Says) {
			t.Errorf("part %s says %q: keep it to one line of at most %d plain ASCII characters in %s", name, part.Says, maxSays, picturePath)
		}
		for _, is := range part.Is {
			if !g.hasPath(is) {
				t.Errorf("part %s names %q, which holds no Go package: mend %s", name, is, picturePath)
			}
		}
	}
}

func TestArrowsAreDrawn(t *testing.T) {
	g, pic := load(t)
	edges := g.partEdges(t, pic)
	drawn := pic.drawn()
	for _, e := range sortedEdges(edges) {
		if _, ok := drawn[e]; ok || e.from == wiringPart {
			continue
		}
		t.Errorf("undrawn arrow %s -> %s: %s; draw it in %s (and in docs/architecture.md), or remove the import",
			e.from, e.to, witnesses(edges[e]), picturePath)
	}
	for e := range drawn {
		if _, ok := edges[e]; !ok {
			t.Errorf("arrow %s -> %s is drawn in %s, but no package of %s imports one of %s: remove it", e.from, e.to, picturePath, e.from, e.to)
		}
	}
}

func TestNeverArrowsAreAbsent(t *testing.T) {
	g, pic := load(t)
	edges := g.partEdges(t, pic)
	drawn := pic.drawn()
	for _, never := range pic.Never {
		if len(never) < 2 {
			t.Errorf("never %q in %s names no two parts", never, picturePath)
			continue
		}
		e, why := edge{never[0], never[1]}, strings.Join(never[2:], " ")
		imports, broken := edges[e]
		words, isDrawn := drawn[e]
		switch {
		case isDrawn && !strings.HasPrefix(words, knownException):
			t.Errorf("%s -> %s is both drawn and never to be (%q): one of them is wrong in %s", e.from, e.to, why, picturePath)
		case broken && !isDrawn:
			t.Errorf("%s must never import %s (%s), but %s", e.from, e.to, why, witnesses(imports))
		}
	}
}

func TestTestHelpersStayOutOfTheBinary(t *testing.T) {
	g, _ := load(t)
	for _, p := range g.sortedPkgs() {
		if isTestPackage(p.rel) {
			continue
		}
		for _, imp := range sortedKeys(p.imports) {
			rel, ok := g.relOf(imp)
			if ok && (isTestPackage(rel) || slices.Contains(testOnly, rel)) {
				t.Errorf("%s imports %s, a package for tests only", position(g.root, p.imports[imp][0]), rel)
			}
		}
	}
}

// pureRule is one package that decides or describes without acting: it reads no
// cache, calls no client and reads no clock, so its answer depends on its arguments
// alone and a table test can hold all of it.
type pureRule struct {
	rel string
	why string
}

var purePackages = []pureRule{
	{"consul/translate", "the translation is pure: a snapshot in, entries out"},
	{"sync/decision", "a decision is data only"},
	{"sync/contract", "the contract is data and interfaces only"},
	{"internal/backends", "which Consul service a backend is, from the objects handed in"},
	{"internal/consullimits", "what Consul can express is a table"},
	{"internal/directive", "a directive in, the responder's answer out"},
	{"internal/pods", "what a gateway pod says, read off the pod handed in"},
	{"internal/manifests", "YAML in, documents out"},
	{"api/v1alpha1", "the API types depend on nothing of the controller"},
}

// forbiddenInPure are import paths (a path, or a prefix ending in "/") that act on the
// world: clients, the network, the file system, metrics.
var forbiddenInPure = []string{
	"k8s.io/client-go/", "sigs.k8s.io/gateway-api/pkg/client/", "github.com/hashicorp/go-cleanhttp",
	"github.com/prometheus/", "net", "net/http", "os", "os/exec",
}

// allowedInPure are the exceptions to forbiddenInPure: client-go's cache package is
// where object names live (cache.ObjectName); pureNames says which of its names.
var allowedInPure = []string{"k8s.io/client-go/tools/cache"}

// pureNames says which names a pure package may take from a package that also holds
// a client or a clock: allowed, or every name but the forbidden ones.
var pureNames = map[string]struct{ allowed, forbidden []string }{
	"k8s.io/client-go/tools/cache":    {allowed: []string{"ObjectName", "NewObjectName", "ObjectToName", "MetaObjectToName", "ParseObjectName", "MetaNamespaceKeyFunc", "SplitMetaNamespaceKey"}},
	"github.com/hashicorp/consul/api": {forbidden: []string{"Client", "NewClient", "Config", "DefaultConfig", "QueryOptions", "WriteOptions", "QueryMeta", "WriteMeta"}},
	"time":                            {forbidden: []string{"Now", "Since", "Until", "Sleep", "After", "AfterFunc", "Tick", "NewTimer", "NewTicker"}},
}

func TestPurePackagesActOnNothing(t *testing.T) {
	g, _ := load(t)
	for _, rule := range purePackages {
		p, ok := g.pkgs[rule.rel]
		if !ok {
			t.Errorf("pure package %s is gone: mend purePackages and docs/architecture.md", rule.rel)
			continue
		}
		for _, imp := range sortedKeys(p.imports) {
			if forbiddenPureImport(imp) {
				t.Errorf("%s imports %s, but %s must act on nothing (%s)", position(g.root, p.imports[imp][0]), imp, rule.rel, rule.why)
			}
		}
		for _, use := range forbiddenPureNames(t, g.root, p) {
			t.Errorf("%s, but %s must act on nothing (%s)", use, rule.rel, rule.why)
		}
	}
}

// packageRules are arrows between packages of the picture's parts (or inside one)
// that must never be, finer than the picture draws.
var packageRules = []struct{ from, to, why string }{
	{"consul/translate", "internal/backends", "a backend is resolved once, by the status pipeline, and the translation writes its decision"},
	{"consul/translate", "sync", "the translation reads sync/decision, never the status workers"},
	{"internal/gatewayapi", "internal/consullimits", "the Gateway API's own rules know nothing of Consul"},
	{"internal/gatewayapi", "internal/backends", "the Gateway API's own rules know nothing of consul-k8s"},
}

func TestPackageRules(t *testing.T) {
	g, _ := load(t)
	for _, rule := range packageRules {
		p, ok := g.pkgs[rule.from]
		if !ok {
			t.Errorf("package %s of a rule is gone: mend packageRules and docs/architecture.md", rule.from)
			continue
		}
		if pos, ok := p.imports[g.module+"/"+rule.to]; ok {
			t.Errorf("%s imports %s, which it must never do: %s", position(g.root, pos[0]), rule.to, rule.why)
		}
	}
}

func forbiddenPureImport(imp string) bool {
	if slices.Contains(allowedInPure, imp) {
		return false
	}
	return slices.ContainsFunc(forbiddenInPure, func(f string) bool {
		return imp == f || (strings.HasSuffix(f, "/") && strings.HasPrefix(imp, f))
	})
}

// forbiddenPureNames parses p's files and names each use of a name pureNames forbids.
func forbiddenPureNames(t *testing.T, root string, p *pkg) []string {
	t.Helper()
	var uses []string
	for _, use := range importedNameUses(t, root, p.files) {
		names, ok := pureNames[use.imp]
		if !ok {
			continue
		}
		if slices.Contains(names.forbidden, use.name) || (names.allowed != nil && !slices.Contains(names.allowed, use.name)) {
			uses = append(uses, use.String())
		}
	}
	return uses
}

// nameUse is one use of a name of an imported package: imp.name at pos.
type nameUse struct {
	pos, imp, name string
}

func (u nameUse) String() string { return fmt.Sprintf("%s uses %s.%s", u.pos, u.imp, u.name) }

// importedNameUses parses files (relative to root) and lists every use of a name of a
// package they import.
func importedNameUses(t *testing.T, root string, files []string) []nameUse {
	t.Helper()
	var uses []nameUse
	fset := token.NewFileSet()
	for _, file := range files {
		f, err := parser.ParseFile(fset, filepath.Join(root, file), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parse %s: %v", file, err)
		}
		local := localNames(f)
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && local[id.Name] != "" {
				uses = append(uses, nameUse{pos: position(root, fset.Position(sel.Pos())), imp: local[id.Name], name: sel.Sel.Name})
			}
			return true
		})
	}
	return uses
}

// localNames maps the name each import has in f to its path.
func localNames(f *ast.File) map[string]string {
	names := map[string]string{}
	for _, spec := range f.Imports {
		imp, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			continue
		}
		name := path.Base(imp)
		if spec.Name != nil {
			name = spec.Name.Name
		}
		names[name] = imp
	}
	return names
}

// load reads the module's packages and the picture once per test.
func load(t *testing.T) (*graph, *picture) {
	t.Helper()
	root := moduleRoot(t)
	g, err := readGraph(root)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, picturePath))
	if err != nil {
		t.Fatal(err)
	}
	pic := &picture{}
	if err := json.Unmarshal(data, pic); err != nil {
		t.Fatalf("read %s: %v", picturePath, err)
	}
	return g, pic
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// readGraph reads every non-test package of the module with go/build: imports only,
// no go command and no network. Nested modules (a directory with its own go.mod) and
// testdata are not the module's.
func readGraph(root string) (*graph, error) {
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	g := &graph{module: modfile.ModulePath(data), root: root, pkgs: map[string]*pkg{}}
	err = filepath.WalkDir(root, func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if dir != root && skipDir(dir, d.Name()) {
			return filepath.SkipDir
		}
		return g.readPackage(dir)
	})
	if err != nil {
		return nil, fmt.Errorf("read the module's packages: %w", err)
	}
	return g, nil
}

func skipDir(dir, name string) bool {
	if name == "testdata" || name == "bin" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
		return true
	}
	_, err := os.Stat(filepath.Join(dir, "go.mod"))
	return err == nil
}

func (g *graph) readPackage(dir string) error {
	bp, err := build.Default.ImportDir(dir, 0)
	var noGo *build.NoGoError
	if errors.As(err, &noGo) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	if len(bp.GoFiles) == 0 {
		return nil
	}
	rel, err := filepath.Rel(g.root, dir)
	if err != nil {
		return err
	}
	rel = filepath.ToSlash(rel)
	p := &pkg{rel: rel, imports: bp.ImportPos}
	for _, f := range bp.GoFiles {
		p.files = append(p.files, path.Join(rel, f))
	}
	g.pkgs[rel] = p
	return nil
}

// relOf gives a module import path's path from the module root.
func (g *graph) relOf(imp string) (string, bool) {
	if imp == g.module {
		return ".", true
	}
	rel, ok := strings.CutPrefix(imp, g.module+"/")
	return rel, ok
}

func (g *graph) hasPath(is string) bool {
	for _, p := range g.pkgs {
		if slices.Contains(p.files, is) || (strings.HasSuffix(is, "/") && strings.HasPrefix(p.rel+"/", is)) {
			return true
		}
	}
	return false
}

func (g *graph) sortedPkgs() []*pkg {
	var pkgs []*pkg
	for _, rel := range sortedKeys(g.pkgs) {
		pkgs = append(pkgs, g.pkgs[rel])
	}
	return pkgs
}

// partEdges gives every arrow between two parts, with the imports that make it.
func (g *graph) partEdges(t *testing.T, pic *picture) map[edge][]string {
	t.Helper()
	edges := map[edge][]string{}
	for _, p := range g.sortedPkgs() {
		from, err := pic.partOf(p)
		if err != nil || from == "" {
			continue // TestEveryPackageIsOnAPart names it
		}
		for _, imp := range sortedKeys(p.imports) {
			rel, ok := g.relOf(imp)
			if !ok || g.pkgs[rel] == nil {
				continue
			}
			to, err := pic.partOf(g.pkgs[rel])
			if err != nil || to == "" || to == from {
				continue
			}
			e := edge{from, to}
			edges[e] = append(edges[e], fmt.Sprintf("%s imports %s", position(g.root, p.imports[imp][0]), rel))
		}
	}
	return edges
}

// partOf gives the part that holds all of p's files: the part whose "is" path is the
// longest that names a file, or a folder above it.
func (pic *picture) partOf(p *pkg) (string, error) {
	parts := map[string]bool{}
	for _, file := range p.files {
		parts[pic.partOfFile(file)] = true
	}
	if len(parts) > 1 {
		return "", fmt.Errorf("package %s is split between parts %q of %s: a part holds whole packages", p.rel, sortedKeys(parts), picturePath)
	}
	for part := range parts {
		return part, nil
	}
	return "", nil
}

func (pic *picture) partOfFile(file string) string {
	best, bestLen := "", -1
	for name, part := range pic.Parts {
		for _, is := range part.Is {
			if (is == file || (strings.HasSuffix(is, "/") && strings.HasPrefix(file, is))) && len(is) > bestLen {
				best, bestLen = name, len(is)
			}
		}
	}
	return best
}

// drawn gives each drawn arrow with its words.
func (pic *picture) drawn() map[edge]string {
	drawn := map[edge]string{}
	for _, a := range pic.Arrows {
		if len(a) >= 2 {
			drawn[edge{a[0], a[1]}] = strings.Join(a[2:], " ")
		}
	}
	return drawn
}

func isTestPackage(rel string) bool {
	return rel == "test" || strings.HasPrefix(rel, "test/")
}

func witnesses(imports []string) string {
	const shown = 3
	if len(imports) <= shown {
		return strings.Join(imports, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(imports[:shown], "; "), len(imports)-shown)
}

func position(root string, pos token.Position) string {
	if rel, err := filepath.Rel(root, pos.Filename); err == nil {
		pos.Filename = filepath.ToSlash(rel)
	}
	return fmt.Sprintf("%s:%d", pos.Filename, pos.Line)
}

func sortedEdges(edges map[edge][]string) []edge {
	keys := make([]edge, 0, len(edges))
	for e := range edges {
		keys = append(keys, e)
	}
	slices.SortFunc(keys, func(a, b edge) int {
		return strings.Compare(a.from+"\x00"+a.to, b.from+"\x00"+b.to)
	})
	return keys
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
