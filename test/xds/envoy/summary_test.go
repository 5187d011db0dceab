package envoy

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated section of docs/consul.md")

// docScenarios are the golden files the documentation shows, in its order, with the
// objects they come from.
var docScenarios = []struct{ name, source, about string }{
	{"example", "examples/gateway.yaml", "The example of `make run-local`: one HTTP listener, a PathPrefix `/echo`."},
	{"http", "test/xds/testdata/http.yaml", "Three routes, overlapping path, header, query and method matches; an Exact path listed after a PathPrefix of the same path."},
	{"traffic", "test/xds/testdata/traffic.yaml", "Weighted backends, request header changes, a prefix rewrite, and a wildcard listener hostname."},
	{"refused", "test/xds/testdata/refused.yaml", "Rules with a filter Consul cannot apply, with a missing or ungranted backend, and a split with a missing backend: what Gateway API answers with an error goes to the blackhole, a cluster without endpoints (Envoy's 503)."},
	{"envoyrefused", "test/xds/testdata/envoyrefused.yaml", "Rules carrying values Consul would pass to Envoy and Envoy would refuse, with the whole table of the port: Host set, `:authority` or an empty name removed, a value with CR LF, a prefix replacement with LF, a `(?<name>)` regex. Each is dropped and its requests get the blackhole (the regex rule is left out: its match cannot be written); the good rules and routes are served, a `%` in a value escaped as `%%`."},
	{"rewrite", "test/xds/testdata/rewrite.yaml", "URLRewrite ReplacePrefixMatch on the rule and on a backend, with and without trailing slashes, empty, and on the prefix `/`."},
	{"precedence", "test/xds/testdata/precedence.yaml", "Where Consul routes against the spec's precedence: a catch-all route hidden by a route naming a host, and an Exact path behind another route's PathPrefix with a header. The routes' RoutedAsSpecified condition says so."},
	{"backends", "test/xds/testdata/backends.yaml", "Weighted backendRefs that each set a header on their own share, a backendRef's header changes after its rule's, and routes that pick their listener by parentRef port."},
	{"listeners", "test/xds/testdata/listeners.yaml", "An HTTPS listener with a certificate from a Secret, and a TCP listener."},
	{"sharedports", "test/xds/testdata/sharedports.yaml", "Gateway listeners with different hostnames on one port, as HTTPRouteListenerHostnameMatching has them: one Consul listener per port, each listener's hostname in its routes', and, with two wildcard listeners on port 80, their routes in the catch-all virtual host, each match narrowed to its wildcard by a header match on `:authority`. A wildcard within another is PortUnavailable. A route attached by port to two listeners serves each one's hostname."},
	{"sharedtls", "test/xds/testdata/sharedtls.yaml", "HTTPS listeners with different hostnames and a certificate each on one port: one Consul listener with both certificates, a filter chain per certificate matched by the SNI names in it, and Consul's own leaf certificate for other names. A third listener whose certificate repeats its common name as its DNS name (which Consul leaves out of SNI matching) is PortUnavailable."},
	{"renamed", "test/xds/testdata/renamed.yaml", "Backend Services whose pods consul-k8s registers under another Consul service (their `consul.hashicorp.com/connect-service` annotation): an HTTP route and a TCP route reach that service; a route to a MeshService reaches the Consul service its `spec.name` names, registered outside Kubernetes; a Service whose pods disagree on their name, and one whose pod is registered on another port, get the blackhole, as does a Service whose Consul name another namespace's Service shares without a ReferenceGrant."},
}

const (
	docPath    = "../../../docs/consul.md"
	beginMark  = "<!-- BEGIN what-envoy-receives: generated from test/xds/testdata/*.golden.json by `go test ./envoy -run TestWhatEnvoyReceivesDoc -update` in test/xds -->"
	endMark    = "<!-- END what-envoy-receives -->"
	goldenGlob = "../testdata/*.golden.json"
)

// The section "What Envoy receives" of docs/consul.md is the golden files, summarised:
// it fails when they changed and the documentation did not.
func TestWhatEnvoyReceivesDoc(t *testing.T) {
	goldens, err := filepath.Glob(goldenGlob)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, s := range docScenarios {
		path := filepath.Join("..", "testdata", s.name+".golden.json")
		goldens = slices.DeleteFunc(goldens, func(g string) bool { return g == path })
		golden, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		summary, err := Summarize(golden)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		fmt.Fprintf(&b, "### %s\n\n%s Objects: [%s](../%s).\n\n%s", s.name, s.about, s.source, s.source, summary)
	}
	if len(goldens) > 0 {
		t.Errorf("golden files not in the documentation: %v", goldens)
	}
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(doc), beginMark)
	_, after, ok2 := strings.Cut(rest, endMark)
	if !ok1 || !ok2 {
		t.Fatalf("%s lacks the markers of the generated section", docPath)
	}
	want := before + beginMark + "\n\n" + b.String() + endMark + after
	if *update {
		if err := os.WriteFile(docPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want != string(doc) {
		t.Errorf("the generated section of %s is stale: run go test ./envoy -run TestWhatEnvoyReceivesDoc -update in test/xds", docPath)
	}
}
