package conformance

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	gosync "sync"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
)

// onePortOneHostname is why a Gateway with listeners of different hostnames on one
// port is not served whole.
const onePortOneHostname = "Consul 1.15's api-gateway serves one hostname per port (Consul 1.15.4 " +
	"agent/structs/config_entry_gateways.go:802-811), and the test's Gateway has listeners with " +
	"different hostnames on port %d: listener %s is Accepted=False/PortUnavailable, where the test expects it Accepted"

// statusKnownFailures are the tests whose status assertions fail, each with why (see
// run.known). Both runs meet them: the traffic run asserts the same status first.
var statusKnownFailures = map[string]string{
	"HTTPRouteHostnameIntersection":     fmt.Sprintf(onePortOneHostname, 80, "listener-2"),
	"HTTPRouteHTTPSListener":            fmt.Sprintf(onePortOneHostname, 443, "https-with-hostname"),
	"HTTPRouteListenerHostnameMatching": fmt.Sprintf(onePortOneHostname, 80, "listener-2"),
	"HTTPRouteRedirectHostAndStatus": "RequestRedirect: Consul's http-route has no redirect (HTTPFilters holds Headers and " +
		"URLRewrite only, Consul 1.15.4 agent/structs/config_entry_routes.go:416-419), so the route is " +
		"Accepted=False/UnsupportedValue, where the test expects it Accepted",
}

// trafficKnownFailures are the tests whose requests do not go where the suite expects,
// by what the xDS Consul serves says (see run.known), and the status ones.
var trafficKnownFailures = withStatusFailures(map[string]string{
	"HTTPRouteInvalidBackendRefUnknownKind":             fmt.Sprintf(answers503, "GET /v2", "a backendRef of an unknown kind"),
	"HTTPRouteInvalidCrossNamespaceBackendRef":          fmt.Sprintf(answers503, "GET /", "a backendRef to another namespace without a ReferenceGrant"),
	"HTTPRouteInvalidNonExistentBackendRef":             fmt.Sprintf(answers503, "GET /", "a backendRef to a missing Service"),
	"HTTPRouteInvalidReferenceGrant":                    fmt.Sprintf(answers503, "GET /", "a backendRef whose ReferenceGrant names another Service"),
	"HTTPRouteNoBackendRefs":                            fmt.Sprintf(answers503, "GET /empty-no-forward and GET /omitted-no-forward", "a rule with no backendRefs"),
	"HTTPRoutePartiallyInvalidViaInvalidReferenceGrant": fmt.Sprintf(answers503, "GET /v2", "the rule whose backendRef has no ReferenceGrant"),
	"HTTPRouteReferenceGrant":                           fmt.Sprintf(answers503, "GET / (once the ReferenceGrant is deleted; before, it reaches web-backend)", "a backendRef whose ReferenceGrant was deleted"),
	"HTTPRouteServiceTypes": "GET /manual-endpointslices and /headless-manual-endpointslices expect 200 from Services without a selector, whose " +
		"EndpointSlices are written by hand; the backends reach Consul's catalog only as consul-k8s registers them, from pods a " +
		"selector picks (testenv.MeshBackends does the same), so those services have no instance and Envoy answers 503 (issue 26: backends as Consul knows them)",
})

// answers503 is why a test of a backendRef that cannot receive traffic fails: Gateway
// API wants a 500 for the requests it would get; Consul's http-route has no fixed
// response, so the controller routes them to a service without instances, and Envoy
// answers 503 (docs/status.md, HTTPRoute not claimed).
const answers503 = "%s expects 500 for %s; the controller routes such requests to a service without instances " +
	"(Consul 1.15's http-route has no fixed response: agent/structs/config_entry_routes.go:416-419), and Envoy answers 503"

func withStatusFailures(traffic map[string]string) map[string]string {
	out := maps.Clone(traffic)
	maps.Copy(out, statusKnownFailures)
	return out
}

// selfDialImports are the suite's helpers that open connections of their own (gRPC, TCP,
// UDP, WebSocket, raw TLS) instead of going through the suite's RoundTripper.
var selfDialImports = regexp.MustCompile(`"sigs.k8s.io/gateway-api/conformance/utils/(grpc|tcp|udp|websocket)"|\bnet\.Dial|\btls\.Dial`)

var shortName = regexp.MustCompile(`ShortName:\s*"([A-Za-z0-9]+)"`)

// selfDialingTests are the suite's tests that dial the Gateway's address themselves,
// read from the source of the suite's module. No answer can be given to them without
// a data plane listening, so both runs skip them.
func selfDialingTests() (sets.Set[string], error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api/conformance").Output()
	if err != nil {
		return nil, fmt.Errorf("find the conformance module: %w", err)
	}
	files, err := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "tests", "*.go"))
	if err != nil {
		return nil, fmt.Errorf("list the conformance tests: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no test sources in the conformance module at %s", out)
	}
	dialing := sets.New[string]()
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if !selfDialImports.Match(src) {
			continue
		}
		for _, m := range shortName.FindAllStringSubmatch(string(src), -1) {
			dialing.Insert(m[1])
		}
	}
	return dialing, nil
}

type outcome struct {
	name     string
	features []string
	result   string
}

// outcomes are what became of each test of the suite in one run.
type outcomes struct {
	run         string
	selfDialing sets.Set[string]
	known       map[string]string
	report      *confv1.ConformanceReport

	mu   gosync.Mutex
	list []outcome
}

// runResults are the outcomes of every run of the binary, for the README.
type runResults struct {
	mu      gosync.Mutex
	runs    []*outcomes
	answers func(test string) string
}

var results runResults

func (r *runResults) start(run string, selfDialing sets.Set[string], known map[string]string) *outcomes {
	o := &outcomes{run: run, selfDialing: selfDialing, known: known}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs = append(r.runs, o)
	return o
}

func (r *runResults) setAnswers(answers func(string) string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answers = answers
}

// record labels a test's outcome: features first (the suite skips what the class does
// not claim), then how the run treats it.
func (o *outcomes) record(t *testing.T, test suite.ConformanceTest, s *suite.ConformanceTestSuite) {
	var names []string
	var missing []string
	for _, f := range test.Features {
		names = append(names, string(f))
		if !s.SupportedFeatures.Has(f) {
			missing = append(missing, string(f))
		}
	}
	result := o.label(t, test.ShortName, missing)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.list = append(o.list, outcome{name: test.ShortName, features: names, result: result})
}

func (o *outcomes) label(t *testing.T, name string, missingFeatures []string) string {
	switch {
	case t.Failed() && o.known[name] != "":
		return "failed (known): " + o.known[name]
	case t.Failed():
		return "failed"
	case !t.Skipped() && !o.requestsSkipped(name):
		return "passed"
	case len(missingFeatures) > 0:
		return "skipped: needs " + strings.Join(missingFeatures, ", ") + ", which the GatewayClass does not claim"
	case o.selfDialing.Has(name):
		return "skipped: its helper dials the Gateway's address itself (gRPC, TCP, UDP, WebSocket or raw TLS), which nothing here answers"
	case o.known[name] != "":
		return "known failure: " + o.known[name]
	case o.run == "status":
		return "status passed; its requests are judged by the run through the xDS"
	}
	return "skipped"
}

// requestsSkipped reports whether the status-only run ended some (sub)test of name at
// a request.
func (o *outcomes) requestsSkipped(name string) bool {
	if o.run != "status" {
		return false
	}
	_, ok := requestsSkipped.Load(name)
	return ok
}

// writeREADME writes docs/conformance/README.md from the runs of this binary.
func (r *runResults) writeREADME(dir string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "# Gateway API %s conformance\n\n", gatewayAPIVersion)
	b.WriteString("Generated by `make conformance` (test/conformance): the official suite against the\n" +
		"controller, Consul 1.15.4 and the container-free cluster (kube-apiserver, etcd,\n" +
		"kube-controller-manager, kube-scheduler, kwok), run twice in a network namespace that\n" +
		"has only loopback.\n\n")
	for _, o := range r.runs {
		b.WriteString(o.section(r.answers))
	}
	return os.WriteFile(filepath.Join(dir, "README.md"), []byte(b.String()), 0o644)
}

var runIntro = map[string]string{
	"status": "## Status only\n\n" +
		"Every test of the claimed features runs up to its first request, which ends it as\n" +
		"skipped; so the status the suite asserts before any traffic is judged. The report in\n" +
		"the suite's format is [" + gatewayAPIVersion + "-report.yaml](" + gatewayAPIVersion + "-report.yaml).\n\n",
	"traffic": "## Traffic, through the configuration Consul serves\n\n" +
		"Every request is routed through the configuration Consul serves the gateway's pod\n" +
		"over Delta ADS, and evaluated by the project's xDS router (test/xds/envoy), not by a\n" +
		"running Envoy: listener by port, filter chain by SNI, virtual host, first matching\n" +
		"route, weighted cluster, endpoint. The answer is what the suite's echo server would\n" +
		"say, from the pod behind the endpoint (the echo pods are in Consul's catalog as mesh\n" +
		"instances, as consul-k8s registers them). No packet leaves loopback. The report in\n" +
		"the suite's format is [" + gatewayAPIVersion + "-report-xds.yaml](" + gatewayAPIVersion + "-report-xds.yaml).\n\n",
}

// section is one run's counts and table.
func (o *outcomes) section(answers func(string) string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	slices.SortFunc(o.list, func(a, b outcome) int { return strings.Compare(a.name, b.name) })
	var b strings.Builder
	b.WriteString(runIntro[o.run])
	counts := map[string]int{}
	for _, oc := range o.list {
		counts[strings.SplitN(oc.result, ":", 2)[0]]++
	}
	fmt.Fprintf(&b, "Totals: %d passed, %d failed, %d failed (known), %d known failures (skipped in CI), %d status passed, %d skipped.\n\n",
		counts["passed"], counts["failed"], counts["failed (known)"], counts["known failure"],
		counts["status passed; its requests are judged by the run through the xDS"], counts["skipped"])
	if o.report != nil {
		for _, p := range o.report.ProfileReports {
			fmt.Fprintf(&b, "- %s: core %s (%d passed, %d failed, %d skipped)", p.Name, p.Core.Result,
				p.Core.Passed, p.Core.Failed, p.Core.Skipped)
			if p.Extended != nil {
				fmt.Fprintf(&b, "; extended %s (%d passed, %d failed, %d skipped)", p.Extended.Result,
					p.Extended.Passed, p.Extended.Failed, p.Extended.Skipped)
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("\n| Test | Features | Outcome |\n|---|---|---|\n")
	for _, oc := range o.list {
		result := oc.result
		if o.run == "traffic" && answers != nil && strings.HasPrefix(result, "failed") {
			if last := answers(oc.name); last != "" {
				result += "; last request: `" + last + "`"
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", oc.name, strings.Join(oc.features, ", "), strings.ReplaceAll(result, "|", "\\|"))
	}
	b.WriteString("\n")
	return b.String()
}
