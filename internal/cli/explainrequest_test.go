package cli

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
)

// requestCase is one request of testdata/explainrequest/requests.yaml.
type requestCase struct {
	Name string   `json:"name"`
	Args []string `json:"args"`
}

// requestAnswer is one answer of testdata/explainrequest/requests.out.yaml.
type requestAnswer struct {
	Name   string        `json:"name"`
	Answer RequestReport `json:"answer"`
}

// TestRouteRequest asks where each request of requests.yaml goes on the cluster of
// objects.yaml, judged as by a controller with a responder, and compares the answers
// with requests.out.yaml (-update rewrites it): the listener by port and host, the
// rule by Gateway API's precedence and by Consul 1.15's, and what the rule does.
func TestRouteRequest(t *testing.T) {
	dir := filepath.Join("testdata", "explainrequest")
	objects, refused, err := readObjects([]string{filepath.Join(dir, "objects.yaml")}, nil)
	if err != nil || len(refused) > 0 {
		t.Fatal(err, refused)
	}
	data, err := os.ReadFile(filepath.Join(dir, "requests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []requestCase
	if err := yaml.UnmarshalStrict(data, &cases); err != nil {
		t.Fatal(err)
	}
	cfg := gwsync.OfflineConfig{ControllerName: gwsync.DefaultControllerName, Capabilities: consullimits.Consul115.WithResponder("responder")}
	var got []requestAnswer
	for _, tc := range cases {
		var f statusFlags
		var rf requestFlags
		fs := requestFlagSet(io.Discard, &f, &rf)
		if err := fs.Parse(tc.Args); err != nil {
			t.Fatalf("%s: %v", tc.Name, err)
		}
		req, gateway, err := parseRequestArgs(fs.Args(), rf)
		if err != nil {
			t.Fatalf("%s: %v", tc.Name, err)
		}
		rep, err := routeRequest(cfg, objects, req, gateway, errorAnswer("responder"))
		if err != nil {
			t.Fatalf("%s: %v", tc.Name, err)
		}
		got = append(got, requestAnswer{Name: tc.Name, Answer: rep})
	}
	out := filepath.Join(dir, "requests.out.yaml")
	gotYAML, err := yaml.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(out, gotYAML, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if diff := gocmp.Diff(string(want), string(gotYAML)); diff != "" {
		t.Errorf("answers (-%s +got):\n%s", out, diff)
	}
}

// explain's flags may come before its subcommand, as they may before route.
func TestExplainSubcommand(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		sub      string
		wantRest []string
	}{
		{[]string{"request", "GET", "http://a/"}, "request", []string{"GET", "http://a/"}},
		{[]string{"--kubeconfig", "k", "-H", "x: 1", "request", "GET", "http://a/"}, "request", []string{"--kubeconfig", "k", "-H", "x: 1", "GET", "http://a/"}},
		{[]string{"--cluster-id=c", "--consul-allow-plaintext", "gateway", "ns/gw"}, "gateway", []string{"--cluster-id=c", "--consul-allow-plaintext", "ns/gw"}},
		{[]string{"--kind", "TCPRoute", "route", "ns/r"}, "route", []string{"--kind", "TCPRoute", "ns/r"}},
	} {
		sub, rest := explainSubcommand(tc.args)
		if sub != tc.sub || !gocmp.Equal(rest, tc.wantRest) {
			t.Errorf("explainSubcommand(%q) = %q, %q; want %q, %q", tc.args, sub, rest, tc.sub, tc.wantRest)
		}
	}
}

// explain request refuses arguments it cannot read as a request, with exit code 2,
// before it reaches the cluster or Consul.
func TestExplainRequestRefusesBadArguments(t *testing.T) {
	for _, args := range [][]string{
		{"request", "GET"},
		{"request", "GET", "/path-without-host"},
		{"request", "GET", "http://host:0/"},
		{"request", "GET", "ftp://host/"},
		{"request", "GET", "http://host/", "-H", "no-colon"},
		{"request", "GET", "http://host/", "--gateway", "no-slash"},
		{"request", "GET", "http://host/", "-o", "wide"},
		{"gateway", "no-slash"},
		{"gateway", "ns/name", "-o", "wide"},
	} {
		var stderr strings.Builder
		if code := Explain(t.Context(), args, io.Discard, &stderr); code != 2 {
			t.Errorf("explain %q: exit %d, want 2 (%s)", args, code, stderr.String())
		}
	}
}
