// Command image packs the static consul-gateway-controller binary into a reproducible
// OCI image, without Docker; `make image` runs it.
//
// The image is FROM scratch with one layer holding the binary at
// /consul-gateway-controller. Every timestamp in it (tar header, config, history) comes
// from SOURCE_DATE_EPOCH, or Unix 0 when that is unset, and nothing about the build
// machine (file owner, mtime, mode) reaches it, so the same binary always gives the
// same manifest digest. It writes an OCI image layout directory and a `docker load`
// tarball, and prints the manifest digest last on stdout.
package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// binaryPath is where the controller lives in the image; the entrypoint runs it.
	binaryPath = "/consul-gateway-controller"
	// nonRootUser is numeric because a scratch image has no /etc/passwd to resolve a
	// name; 65532 is the conventional "nonroot" id of distroless images.
	nonRootUser = "65532:65532"
	sourceURL   = "https://github.com/consul-gateway-controller/consul-gateway-controller"
	title       = "consul-gateway-controller"
)

// elfMachines maps the GOARCH values an image can be built for to the ELF machine
// their binaries carry, so a binary built for another architecture is refused.
var elfMachines = map[string]elf.Machine{
	"amd64":   elf.EM_X86_64,
	"arm64":   elf.EM_AARCH64,
	"arm":     elf.EM_ARM,
	"386":     elf.EM_386,
	"ppc64le": elf.EM_PPC64,
	"s390x":   elf.EM_S390,
	"riscv64": elf.EM_RISCV,
}

// spec is everything the image content depends on; equal specs give equal digests.
type spec struct {
	binary  string    // path of the static linux binary to pack
	arch    string    // GOARCH the binary was built for
	version string    // org.opencontainers.image.version label
	created time.Time // every timestamp in the image
}

type options struct {
	spec
	layoutDir  string
	tarball    string
	repository string
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(2)
	}
	if err := run(o, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.StringVar(&o.binary, "binary", "", "static linux binary of the controller (required)")
	fs.StringVar(&o.arch, "arch", "amd64", "GOARCH the binary was built for")
	fs.StringVar(&o.version, "version", "dev", "image version: the org.opencontainers.image.version label and the tag")
	fs.StringVar(&o.layoutDir, "layout", "", "OCI image layout directory to (re)create (required)")
	fs.StringVar(&o.tarball, "tarball", "", "docker load tarball to write (required)")
	fs.StringVar(&o.repository, "repository", title, "repository the tarball tags the image with")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.binary == "" || o.layoutDir == "" || o.tarball == "" {
		return o, errors.New("-binary, -layout and -tarball are required")
	}
	created, err := sourceDateEpoch(os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		return o, err
	}
	o.created = created
	return o, nil
}

// sourceDateEpoch follows https://reproducible-builds.org/specs/source-date-epoch/:
// unset means Unix 0, anything else must be a non-negative count of seconds.
func sourceDateEpoch(v string) (time.Time, error) {
	if v == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	secs, err := strconv.ParseInt(v, 10, 64)
	if err != nil || secs < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a non-negative number of seconds", v)
	}
	return time.Unix(secs, 0).UTC(), nil
}

func run(o options, stdout io.Writer) error {
	// Checked before anything is written, so a bad version leaves no half output.
	tag, err := name.NewTag(o.repository + ":" + o.version)
	if err != nil {
		return fmt.Errorf("tag from -repository and -version: %w", err)
	}
	img, err := build(o.spec)
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return fmt.Errorf("image digest: %w", err)
	}
	if err := writeLayout(o.layoutDir, img, o.spec); err != nil {
		return err
	}
	if err := tarball.WriteToFile(o.tarball, tag, img); err != nil {
		return fmt.Errorf("write tarball %s: %w", o.tarball, err)
	}
	fmt.Fprintf(stdout, "wrote OCI layout %s and tarball %s (%s)\n", o.layoutDir, o.tarball, tag)
	fmt.Fprintln(stdout, digest)
	return nil
}

// build assembles the image in memory: scratch, OCI media types, the config, and the
// one layer with the binary.
func build(s spec) (v1.Image, error) {
	if err := checkStaticELF(s.binary, s.arch); err != nil {
		return nil, err
	}
	layer, err := binaryLayer(s.binary, s.created)
	if err != nil {
		return nil, err
	}
	// OCI rather than empty.Image's Docker media types: the output is an OCI layout.
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, configFile(s))
	if err != nil {
		return nil, fmt.Errorf("set image config: %w", err)
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: s.created},
			CreatedBy: "make image",
			Comment:   "static controller binary at " + binaryPath,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("append binary layer: %w", err)
	}
	return img, nil
}

func configFile(s spec) *v1.ConfigFile {
	return &v1.ConfigFile{
		Created:      v1.Time{Time: s.created},
		OS:           "linux",
		Architecture: s.arch,
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			User:       nonRootUser,
			Entrypoint: []string{binaryPath},
			Labels: map[string]string{
				"org.opencontainers.image.source":  sourceURL,
				"org.opencontainers.image.title":   title,
				"org.opencontainers.image.version": s.version,
			},
		},
	}
}

// checkStaticELF refuses what would only fail at run time in a scratch image: a binary
// for another OS or architecture, or one that needs a dynamic loader the image lacks.
func checkStaticELF(path, arch string) error {
	want, ok := elfMachines[arch]
	if !ok {
		return fmt.Errorf("architecture %q is not one of the GOARCH values this tool knows", arch)
	}
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s is not a linux binary: %w", path, err)
	}
	defer f.Close()
	if f.Machine != want {
		return fmt.Errorf("%s is built for %s, not %s (GOARCH=%s)", path, f.Machine, want, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; build it with CGO_ENABLED=0", path)
		}
	}
	return nil
}

// binaryLayer reads the binary once and packs it as the only tar entry. The header is
// written field by field so nothing of the file on disk except its bytes reaches it.
func binaryLayer(path string, mtime time.Time) (v1.Layer, error) {
	content, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read binary: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     filepath.Base(binaryPath), // layer paths are relative to the root
		Size:     int64(len(content)),
		Mode:     0o755,
		ModTime:  mtime,
		// USTAR has no atime/ctime or PAX records that could carry anything else.
		Format: tar.FormatUSTAR,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, fmt.Errorf("tar header: %w", err)
	}
	if _, err := tw.Write(content); err != nil {
		return nil, fmt.Errorf("tar content: %w", err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close tar: %w", err)
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return layer, nil
}

// writeLayout recreates dir as an OCI layout holding only img. layout.Write starts a
// fresh index but keeps old blobs, so without the removal every earlier build's layer
// would pile up in blobs/. A directory that is not a layout is left alone rather than
// deleted.
func writeLayout(dir string, img v1.Image, s spec) error {
	if err := removeOldLayout(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("create OCI layout %s: %w", dir, err)
	}
	err = p.AppendImage(img,
		// The ref name lets `skopeo copy oci:DIR:VERSION` pick the image by tag.
		layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": s.version}),
		layout.WithPlatform(v1.Platform{OS: "linux", Architecture: s.arch}),
	)
	if err != nil {
		return fmt.Errorf("write image to OCI layout %s: %w", dir, err)
	}
	return nil
}

func removeOldLayout(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(entries) == 0) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
		return fmt.Errorf("%s exists and is not an OCI layout; not removing it: %w", dir, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove old OCI layout %s: %w", dir, err)
	}
	return nil
}
