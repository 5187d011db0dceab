package buildinfo

import (
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFromBuildInfo(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   debug.BuildInfo
		want Info
		line string
	}{{
		name: "a build of a changed checkout",
		in: debug.BuildInfo{GoVersion: "go1.26.7", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "6bcfe9f258e1d3a1b2c3d4e5f60718293a4b5c6d"},
			{Key: "vcs.time", Value: "2026-12-07T13:11:07Z"},
			{Key: "vcs.modified", Value: "true"},
		}},
		want: Info{Version: "dev", Revision: "6bcfe9f258e1d3a1b2c3d4e5f60718293a4b5c6d", Modified: true, Time: "2026-12-07T13:11:07Z", GoVersion: "go1.26.7"},
		line: "consul-gateway-controller dev (commit 6bcfe9f258e1-dirty, 2026-12-07T13:11:07Z, go1.26.7)",
	}, {
		name: "a release tag, no version control information",
		in:   debug.BuildInfo{GoVersion: "go1.26.7", Main: debug.Module{Version: "v0.2.0"}},
		want: Info{Version: "v0.2.0", GoVersion: "go1.26.7"},
		line: "consul-gateway-controller v0.2.0 (commit unknown, go1.26.7)",
	}} {
		t.Run(tt.name, func(t *testing.T) {
			got := fromBuildInfo(&tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("fromBuildInfo (-want +got):\n%s", diff)
			}
			if got.String() != tt.line {
				t.Errorf("String() = %q, want %q", got.String(), tt.line)
			}
		})
	}
}

// What the build stamps wins over what Go recorded.
func TestStamped(t *testing.T) {
	recorded := Info{Version: "dev", Revision: "aaaa", Time: "2026-01-01T00:00:00Z", GoVersion: "go1.26.7"}
	got := stamped(recorded, "v0.3.0", "1e282730ad4e5f60718293a4b5c6d7e8f9a0b1c2-dirty")
	want := Info{Version: "v0.3.0", Revision: "1e282730ad4e5f60718293a4b5c6d7e8f9a0b1c2", Modified: true, GoVersion: "go1.26.7"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stamped (-want +got):\n%s", diff)
	}
	if got := stamped(recorded, "", ""); got != recorded {
		t.Errorf("stamped with nothing = %+v, want %+v", got, recorded)
	}
}
