package conformance

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	gosync "sync"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/conformance/judge"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// selfDialImports are the suite's helpers that open connections of their own (gRPC, TCP,
// UDP, WebSocket, raw TLS) instead of going through the suite's RoundTripper.
var selfDialImports = regexp.MustCompile(`"sigs.k8s.io/gateway-api/conformance/utils/(grpc|tcp|udp|websocket)"|\bnet\.Dial|\btls\.Dial`)

var shortName = regexp.MustCompile(`ShortName:\s*"([A-Za-z0-9]+)"`)

// selfDialingTests are the suite's tests that dial the Gateway's address themselves,
// read from the source of the suite's module, each with how ("tcp" for the suite's
// tcp helper alone, which tcpFront can answer).
func selfDialingTests() (map[string]string, error) {
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
	dialing := map[string]string{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		how := sets.New[string]()
		for _, m := range selfDialImports.FindAllStringSubmatch(string(src), -1) {
			how.Insert(cmpOr(m[1], m[0]))
		}
		if how.Len() == 0 {
			continue
		}
		for _, m := range shortName.FindAllStringSubmatch(string(src), -1) {
			dialing[m[1]] = strings.Join(sets.List(how), ", ")
		}
	}
	return dialing, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// dialsTCPOnly: the test's own dials all go through the suite's tcp helper.
const dialsTCPOnly = "tcp"

// tcpDials is why a TCPRoute test that sends traffic cannot run where tcpFront does not
// answer: the suite's tcp helper dials the Gateway's address itself (no RoundTripper
// answers it), an address nothing answers here, and no packet may leave loopback.
const tcpDials = "its traffic goes through the suite's tcp helper, which dials the Gateway's address itself " +
	"(no RoundTripper answers it): only the traffic run, inside the loopback-only network namespace, puts the " +
	"Gateways' addresses on lo and answers them. The whole test is skipped, its status assertions with it"

// selfDialingSkip says why a test that dials by itself is skipped in a run; tcpFront
// is why the traffic run could not answer TCP, "" when it does.
func selfDialingSkip(run, how, tcpFront string) string {
	switch {
	case how != dialsTCPOnly:
		return "its helper dials the Gateway's address itself (" + how + "), which nothing here answers"
	case run == judge.StatusRun:
		return tcpDials + " here; the traffic run judges it"
	case tcpFront != "":
		return tcpDials + ": " + tcpFront
	}
	return ""
}

// outcome is what became of one suite test in one run, as the run saw it (the judge
// refines "failed").
type outcome struct {
	Name     string   `json:"name"`
	Features []string `json:"features"`
	Result   string   `json:"result"`
	// Requests is how many requests the test sent that were answered (traffic run).
	Requests int `json:"requests,omitempty"`
	// LastRequest is the last request and its answer (traffic run).
	LastRequest string `json:"lastRequest,omitempty"`
	// OwnTCP: the test's tcp helper dialed the Gateway itself, answered by tcpFront.
	OwnTCP bool `json:"ownTCP,omitempty"`
}

// outcomes are what became of each test of the suite in one run.
type outcomes struct {
	Run        string    `json:"run"`
	ReportFile string    `json:"reportFile,omitempty"`
	List       []outcome `json:"outcomes"`

	// skipWhy says why a test the run skipped whole is skipped.
	skipWhy map[string]string
	// ownTCP are the tests whose tcp helper's dials tcpFront answers in this run.
	ownTCP map[string]bool
	// traffic, when set, says how many requests of a test were answered and the last.
	traffic func(test string) (int, string)
	mu      gosync.Mutex
}

// runResults are the outcomes of every run of the binary, for the judge's tables.
type runResults struct {
	Commit string      `json:"commit"`
	Runs   []*outcomes `json:"runs"`

	mu gosync.Mutex
}

var results runResults

func (r *runResults) start(run, reportFile string, skipWhy map[string]string, ownTCP map[string]bool) *outcomes {
	o := &outcomes{Run: run, ReportFile: reportFile, skipWhy: skipWhy, ownTCP: ownTCP}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Runs = append(r.Runs, o)
	return o
}

// write saves the results for the judge.
func (r *runResults) write(path string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range r.Runs {
		o.mu.Lock()
		slices.SortFunc(o.List, func(a, b outcome) int { return strings.Compare(a.Name, b.Name) })
		o.mu.Unlock()
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

func readResults(path string) (*runResults, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	var r runResults
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decode results %s: %w", path, err)
	}
	return &r, nil
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
	oc := outcome{Name: test.ShortName, Features: names, Result: o.label(t, test.ShortName, missing), OwnTCP: o.ownTCP[test.ShortName]}
	if o.traffic != nil {
		oc.Requests, oc.LastRequest = o.traffic(test.ShortName)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.List = append(o.List, oc)
}

// Labels of outcomes; the tables count by the text before the first colon.
const (
	labelPassed       = "passed"
	labelStatusPassed = "status passed"
	labelFailed       = "failed"
	labelSkipped      = "skipped"
)

func (o *outcomes) label(t *testing.T, name string, missingFeatures []string) string {
	switch {
	case t.Failed():
		return labelFailed
	case !t.Skipped() && !o.requestsSkipped(name):
		return labelPassed
	case len(missingFeatures) > 0:
		return labelSkipped + ": needs " + strings.Join(missingFeatures, ", ") + ", which the GatewayClass does not claim"
	case o.skipWhy[name] != "":
		return labelSkipped + ": " + o.skipWhy[name]
	case o.Run == judge.StatusRun:
		return labelStatusPassed + ": its requests are judged by the run through the xDS"
	}
	return labelSkipped
}

// requestsSkipped reports whether the status-only run ended some (sub)test of name at
// a request.
func (o *outcomes) requestsSkipped(name string) bool {
	if o.Run != judge.StatusRun {
		return false
	}
	_, ok := requestsSkipped.Load(name)
	return ok
}

// commitOf names the commit the binary runs at, "-dirty" when the work tree differs
// from it in anything but the generated docs/conformance (which every run rewrites).
func commitOf() string {
	root, err := testenv.RepoRoot()
	if err != nil {
		return "unknown"
	}
	c, err := testenv.ReadCheckout(root, "docs/conformance")
	if err != nil {
		return "unknown"
	}
	if c.Changed != "" {
		return c.Commit[:12] + "-dirty"
	}
	return c.Commit[:12]
}
