package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// staticBinary is a small static linux/amd64 program built once for all tests: the
// tool refuses anything that is not a static ELF for the requested architecture.
var staticBinary string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "image-test")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	staticBinary, err = buildStatic(dir)
	if err != nil {
		panic(err)
	}
	return m.Run()
}

func buildStatic(dir string) (string, error) {
	src := filepath.Join(dir, "hello.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() { println(\"hello\") }\n"), 0o644); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "hello")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w -buildid=", "-o", out, src)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", errors.New("build test binary: " + err.Error() + ": " + string(b))
	}
	return out, nil
}

// copyBinary gives each test its own input file, so changing its mtime or bytes does
// not affect other tests.
func copyBinary(t *testing.T, extra []byte) string {
	t.Helper()
	b, err := os.ReadFile(staticBinary)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "consul-gateway-controller")
	// Bytes after the end of an ELF file are ignored by its loader and by debug/elf,
	// so appending them makes a different, still valid, binary.
	if err := os.WriteFile(path, append(b, extra...), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func testSpec(binary string) spec {
	return spec{binary: binary, arch: "amd64", version: "v0.0.0-test", created: time.Unix(0, 0).UTC()}
}

func mustBuild(t *testing.T, s spec) v1.Image {
	t.Helper()
	img, err := build(s)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func digest(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestSameInputSameDigest(t *testing.T) {
	bin := copyBinary(t, nil)
	first := digest(t, mustBuild(t, testSpec(bin)))

	// What differs between two checkouts or two builds of the same source: the file's
	// times and its mode bits. None of them may reach the image.
	later := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	if err := os.Chtimes(bin, later, later); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(bin, 0o700); err != nil {
		t.Fatal(err)
	}
	second := digest(t, mustBuild(t, testSpec(bin)))
	if first != second {
		t.Errorf("digest changed with only the file's mtime and mode: %s then %s", first, second)
	}
}

func TestInputsChangeDigest(t *testing.T) {
	base := digest(t, mustBuild(t, testSpec(copyBinary(t, nil))))
	other := testSpec(copyBinary(t, []byte{0}))
	later := testSpec(copyBinary(t, nil))
	later.created = time.Unix(1700000000, 0).UTC()
	version := testSpec(copyBinary(t, nil))
	version.version = "v0.0.1-test"
	for name, s := range map[string]spec{"binary": other, "SOURCE_DATE_EPOCH": later, "version": version} {
		if d := digest(t, mustBuild(t, s)); d == base {
			t.Errorf("a different %s gave the same digest %s", name, d)
		}
	}
}

func TestConfig(t *testing.T) {
	s := testSpec(copyBinary(t, nil))
	s.created = time.Unix(1700000000, 0).UTC()
	cf, err := mustBuild(t, s).ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("User = %q, want the numeric non-root 65532:65532", cf.Config.User)
	}
	if got := cf.Config.Entrypoint; len(got) != 1 || got[0] != "/consul-gateway-controller" {
		t.Errorf("Entrypoint = %q, want [/consul-gateway-controller]", got)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("platform = %s/%s, want linux/amd64", cf.OS, cf.Architecture)
	}
	if !cf.Created.Equal(s.created) {
		t.Errorf("Created = %v, want %v", cf.Created.Time, s.created)
	}
	for _, h := range cf.History {
		if !h.Created.Equal(s.created) {
			t.Errorf("history entry %q created %v, want %v", h.CreatedBy, h.Created.Time, s.created)
		}
	}
	wantLabels := map[string]string{
		"org.opencontainers.image.source":  "https://github.com/consul-gateway-controller/consul-gateway-controller",
		"org.opencontainers.image.title":   "consul-gateway-controller",
		"org.opencontainers.image.version": "v0.0.0-test",
	}
	for k, want := range wantLabels {
		if got := cf.Config.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
}

func TestLayerHoldsOnlyTheBinary(t *testing.T) {
	bin := copyBinary(t, nil)
	if err := os.Chmod(bin, 0o700); err != nil { // the image must not copy the file's mode
		t.Fatal(err)
	}
	s := testSpec(bin)
	s.created = time.Unix(1700000000, 0).UTC()
	layers, err := mustBuild(t, s).Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	headers, contents := readLayer(t, layers[0])
	if len(headers) != 1 {
		t.Fatalf("layer holds %d entries, want only the binary", len(headers))
	}
	h := headers[0]
	if h.Name != "consul-gateway-controller" || h.Typeflag != tar.TypeReg {
		t.Errorf("entry %q type %c, want the regular file consul-gateway-controller", h.Name, h.Typeflag)
	}
	if h.Mode != 0o755 || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
		t.Errorf("mode %o uid %d gid %d uname %q gname %q, want 755 0 0 and no names", h.Mode, h.Uid, h.Gid, h.Uname, h.Gname)
	}
	if !h.ModTime.Equal(s.created) {
		t.Errorf("mtime %v, want %v", h.ModTime, s.created)
	}
	want, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(contents[0], want) {
		t.Error("the layer's file is not the binary")
	}
}

func readLayer(t *testing.T, l v1.Layer) ([]*tar.Header, [][]byte) {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var headers []*tar.Header
	var contents [][]byte
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return headers, contents
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		headers = append(headers, h)
		contents = append(contents, b)
	}
}

func TestRunWritesLayoutAndTarball(t *testing.T) {
	out := t.TempDir()
	o := options{
		spec:       testSpec(copyBinary(t, nil)),
		layoutDir:  filepath.Join(out, "layout"),
		tarball:    filepath.Join(out, "image.tar"),
		repository: "consul-gateway-controller",
	}
	// A build of another binary first: the second run must replace the layout, not
	// add to it.
	earlier := o
	earlier.binary = copyBinary(t, []byte{0})
	if err := run(earlier, io.Discard); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	if err := run(o, &stdout); err != nil {
		t.Fatal(err)
	}
	want := digest(t, mustBuild(t, o.spec))
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if got := lines[len(lines)-1]; got != want.String() {
		t.Errorf("last line printed %q, want the digest %s", got, want)
	}

	checkLayout(t, o.layoutDir, want)
	checkTarball(t, o.tarball, mustBuild(t, o.spec))
}

func checkLayout(t *testing.T, dir string, want v1.Hash) {
	t.Helper()
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 {
		t.Fatalf("layout index lists %d manifests, want 1", len(m.Manifests))
	}
	blobs, err := os.ReadDir(filepath.Join(dir, "blobs", "sha256"))
	if err != nil {
		t.Fatal(err)
	}
	if len(blobs) != 3 {
		t.Errorf("layout holds %d blobs, want 3 (manifest, config, layer) of this build only", len(blobs))
	}
	if got := m.Manifests[0].Digest; got != want {
		t.Errorf("layout holds %s, want %s", got, want)
	}
	if got := m.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; got != "v0.0.0-test" {
		t.Errorf("layout ref name %q, want the version", got)
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	img, err := p.Image(want)
	if err != nil {
		t.Fatal(err)
	}
	// Validated as read back rather than as built: in memory, go-containerregistry's
	// layer descriptor carries an empty annotation map where the parsed manifest has
	// nil, which validate reports though the bytes are the same.
	if err := validate.Image(img); err != nil {
		t.Errorf("image read back from the layout: %v", err)
	}
	if got := digest(t, img); got != want {
		t.Errorf("image read back from the layout has digest %s, want %s", got, want)
	}
}

func checkTarball(t *testing.T, path string, want v1.Image) {
	t.Helper()
	img, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Image(img); err != nil {
		t.Errorf("image read back from the tarball: %v", err)
	}
	// The docker tarball keeps the config and layers but not the manifest, so the
	// config digest (what docker calls the image ID) is what must survive.
	got, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	wantCfg, err := want.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	if got != wantCfg {
		t.Errorf("tarball config %s, want %s", got, wantCfg)
	}
}

func TestRunRefusesToDeleteANonLayoutDirectory(t *testing.T) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "keep")
	if err := os.WriteFile(keep, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	o := options{spec: testSpec(copyBinary(t, nil)), layoutDir: dir, tarball: filepath.Join(t.TempDir(), "image.tar"), repository: "x"}
	if err := run(o, io.Discard); err == nil {
		t.Fatal("run replaced a directory that is not an OCI layout")
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("file in the directory is gone: %v", err)
	}
}

func TestBuildRefusesWhatCannotRunFromScratch(t *testing.T) {
	notELF := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	wrongArch := testSpec(copyBinary(t, nil))
	wrongArch.arch = "arm64"
	unknownArch := testSpec(copyBinary(t, nil))
	unknownArch.arch = "vax"
	for name, s := range map[string]spec{"not ELF": testSpec(notELF), "wrong arch": wrongArch, "unknown arch": unknownArch} {
		if _, err := build(s); err == nil {
			t.Errorf("%s: build accepted it", name)
		}
	}
}

func TestSourceDateEpoch(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Time
		wantErr bool
	}{
		{"", time.Unix(0, 0), false},
		{"1700000000", time.Unix(1700000000, 0), false},
		{"-1", time.Time{}, true},
		{"yesterday", time.Time{}, true},
	}
	for _, tt := range tests {
		got, err := sourceDateEpoch(tt.in)
		if (err != nil) != tt.wantErr || !got.Equal(tt.want) {
			t.Errorf("sourceDateEpoch(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}
