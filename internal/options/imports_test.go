package options

import (
	"go/build"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// TestImportsNothingOfThisModule keeps the package reusable: the controller and the
// read-only commands share it, so it must not pull in the parts (consul, sync,
// dataplane, leader, ...). A direct import is the only way to reach them, so the
// package's own imports are what is checked.
func TestImportsNothingOfThisModule(t *testing.T) {
	goMod, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	module := modfile.ModulePath(goMod)
	if module == "" {
		t.Fatal("go.mod names no module")
	}
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkg.Imports) == 0 {
		t.Fatal("no imports read: the check would pass for any package")
	}
	for _, path := range pkg.Imports {
		if path == module || strings.HasPrefix(path, module+"/") {
			t.Errorf("internal/options imports %s: convert its values in the command instead", path)
		}
	}
}
