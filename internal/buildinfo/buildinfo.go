// Package buildinfo says which build of the controller is running: the version and
// commit Go stamps into the binary (runtime/debug.ReadBuildInfo), for the version
// command, the start-up log line and the build_info metric.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Info is what one binary knows of its build.
type Info struct {
	// Version is the main module's version: a release tag when the binary was built as
	// a module at that tag, else "dev".
	Version string
	// Revision is the commit the binary was built from, "" when the build had no
	// version control information (go build outside a checkout, or -buildvcs=false).
	Revision string
	// Modified says the checkout had changes the commit does not hold.
	Modified bool
	// Time is the commit's time, RFC 3339.
	Time string
	// GoVersion is the toolchain that built the binary.
	GoVersion string
}

// version and revision are stamped by the build (-ldflags -X, see the Makefile's
// BUILD_LDFLAGS and testenv.BuildController): Go's own version control stamping is
// off wherever GOFLAGS has -buildvcs=false, as on the project's machines. revision
// ends in "-dirty" for a checkout with changes.
var version, revision string

// Read returns the running binary's build information.
func Read() Info {
	info := Info{Version: "dev", GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		info = fromBuildInfo(bi)
	}
	return stamped(info, version, revision)
}

// stamped is info with what the build stamped in place of what Go recorded.
func stamped(info Info, version, revision string) Info {
	if version != "" {
		info.Version = version
	}
	if revision != "" {
		info.Revision, info.Modified = strings.CutSuffix(revision, "-dirty")
		info.Time = "" // Go's commit time belongs to its own stamping
	}
	return info
}

func fromBuildInfo(bi *debug.BuildInfo) Info {
	info := Info{Version: bi.Main.Version, GoVersion: bi.GoVersion}
	if info.Version == "" || info.Version == "(devel)" {
		info.Version = "dev"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		case "vcs.time":
			info.Time = s.Value
		}
	}
	return info
}

// ShortRevision is the commit's first 12 hex digits and "-dirty" for a build of a
// changed checkout; "unknown" without version control information.
func (i Info) ShortRevision() string {
	if i.Revision == "" {
		return "unknown"
	}
	rev := i.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if i.Modified {
		rev += "-dirty"
	}
	return rev
}

// String is the version command's line.
func (i Info) String() string {
	s := fmt.Sprintf("consul-gateway-controller %s (commit %s", i.Version, i.ShortRevision())
	if i.Time != "" {
		s += ", " + i.Time
	}
	return s + ", " + i.GoVersion + ")"
}
