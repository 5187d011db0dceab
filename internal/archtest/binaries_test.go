package archtest

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// executableMagic begins every file an executable format this project's builds write:
// ELF (Linux), Mach-O (both byte orders, 32 and 64 bit, and universal) and PE ("MZ").
var executableMagic = [][]byte{
	[]byte("\x7fELF"),
	{0xfe, 0xed, 0xfa, 0xce}, {0xfe, 0xed, 0xfa, 0xcf}, {0xce, 0xfa, 0xed, 0xfe}, {0xcf, 0xfa, 0xed, 0xfe},
	{0xca, 0xfe, 0xba, 0xbe},
	[]byte("MZ"),
}

// maxTrackedBytes is the largest file the repository may track: a built binary or an
// output is tens of megabytes; the largest source or test data is well under this.
const maxTrackedBytes = 4 << 20

// The repository never tracks a built binary: `go build ./test/localstack` at the root
// writes one next to go.mod, and a careless `git add -A` takes it.
func TestNoBuiltBinaryTracked(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for name := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if problem := trackedFileProblem(filepath.Join(root, name)); problem != "" {
			t.Errorf("%s is tracked, but %s: remove it with git rm --cached and ignore it", name, problem)
		}
	}
}

// trackedFileProblem says why path must not be tracked, or "" when it may be. A file
// listed but deleted in the work tree is no problem here.
func trackedFileProblem(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || info.IsDir() {
		return ""
	}
	if info.Size() > maxTrackedBytes {
		return "it is larger than a source file can be"
	}
	head := make([]byte, 4)
	n, _ := io.ReadFull(f, head)
	for _, magic := range executableMagic {
		if bytes.HasPrefix(head[:n], magic) {
			return "it is an executable"
		}
	}
	return ""
}
