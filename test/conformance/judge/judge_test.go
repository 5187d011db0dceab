package judge

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
)

// A 503 where the suite wants 500, as its http helper reports it.
const got503 = "Response expectation failed for request: {URL:{Scheme:http Host:10.96.0.1 Path:/v2}}  not ready yet: expected status code to be 500, got 503 (after 1s)\n"

var testKnown = []Known{
	{Test: "StatusFails", StatusToo: true, Failure: regexp.MustCompile(`(listener-2).*?(PortUnavailable)`), Why: "one hostname per port"},
	{Test: "Wants500", Failure: regexp.MustCompile(`Path:(/v2)\}.*?(got 503)`), Why: "no fixed response"},
}

// eventLog builds go tool test2json's events: each step is "action test [output]".
type eventLog []testEvent

func (l eventLog) with(action, test, output string) eventLog {
	return append(l, testEvent{Action: action, Test: test, Output: output})
}

// run adds a top-level run whose suite tests end as given, each with its output.
func (l eventLog) run(top string, tests map[string][2]string) eventLog {
	l = l.with("run", top, "")
	failed := false
	for _, name := range sortedKeys(tests) {
		action, output := tests[name][0], tests[name][1]
		l = l.with("run", top+"/"+name, "").
			with("output", top+"/"+name+"/case_0", output).
			with(action, top+"/"+name, "")
		failed = failed || action == "fail"
	}
	if failed {
		return l.with("fail", top, "")
	}
	return l.with("pass", top, "")
}

func (l eventLog) finished() eventLog {
	return l.with("output", "", FinishedMarker+" at commit abc, exit code 1\n")
}

func (l eventLog) read(t *testing.T) *Events {
	t.Helper()
	var b strings.Builder
	for _, e := range l {
		line, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	ev, err := ReadEvents(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestJudge(t *testing.T) {
	statusFails := [2]string{"fail", "listener-2 is Accepted=False/PortUnavailable\n"}
	wants500 := [2]string{"fail", got503}
	tests := []struct {
		name   string
		events eventLog
		// problems are substrings of the problems, in order; none means as expected.
		problems []string
		labels   map[string]map[string]string // run, test: label prefix
	}{{
		name: "every known test fails with its failure",
		events: eventLog{}.
			run("TestConformance", map[string][2]string{"StatusFails": statusFails, "Wants500": {"pass", ""}, "Other": {"pass", ""}}).
			run("TestConformanceTraffic", map[string][2]string{"StatusFails": statusFails, "Wants500": wants500, "Other": {"pass", ""}}).
			finished(),
		labels: map[string]map[string]string{
			StatusRun:  {"StatusFails": "failed as known: one hostname per port; the failure: `listener-2 … PortUnavailable`"},
			TrafficRun: {"StatusFails": "failed as known", "Wants500": "failed as known: no fixed response; the failure: `/v2 … got 503`"},
		},
	}, {
		name: "a known test that fails otherwise",
		events: eventLog{}.
			run("TestConformanceTraffic", map[string][2]string{"StatusFails": statusFails, "Wants500": {"fail", "Error: timeout while waiting\n"}}).
			finished(),
		problems: []string{"traffic run, Wants500: known to fail with"},
		labels:   map[string]map[string]string{TrafficRun: {"Wants500": "failed (unexpectedly: not with its known failure)"}},
	}, {
		name: "a known test that passes",
		events: eventLog{}.
			run("TestConformance", map[string][2]string{"StatusFails": {"pass", ""}}).
			finished(),
		problems: []string{"status run, StatusFails: known to fail, it passed"},
	}, {
		name: "a failure nobody knows",
		events: eventLog{}.
			run("TestConformance", map[string][2]string{"StatusFails": statusFails, "Other": {"fail", "Error: expected 200\n"}}).
			finished(),
		problems: []string{"status run, Other: failed:\n  Error: expected 200"},
	}, {
		name: "a known test that did not run",
		events: eventLog{}.
			run("TestConformanceTraffic", map[string][2]string{"Wants500": wants500}).
			finished(),
		problems: []string{"traffic run, StatusFails: known to fail, but it did not run"},
	}, {
		name:     "a run that failed by itself",
		events:   eventLog{}.run("TestConformance", map[string][2]string{"StatusFails": statusFails}).with("output", "TestConformance", ErrorMarker+"stop controller: timeout\n").finished(),
		problems: []string{"stop controller: timeout"},
	}, {
		name: "a run that failed with no test failing",
		events: eventLog{}.with("run", "TestConformance", "").with("output", "TestConformance", "setup: no address\n").
			with("fail", "TestConformance", "").finished(),
		problems: []string{"status run, StatusFails: known to fail, but it did not run", "status run failed outside the suite's tests"},
	}, {
		name:     "a binary that died",
		events:   eventLog{}.run("TestConformance", map[string][2]string{"StatusFails": statusFails}),
		problems: []string{"the binary did not finish"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := Judge(tt.events.read(t), testKnown)
			if len(j.Problems) != len(tt.problems) {
				t.Fatalf("problems %q, want %d containing %q", j.Problems, len(tt.problems), tt.problems)
			}
			for i, want := range tt.problems {
				if !strings.Contains(j.Problems[i], want) {
					t.Errorf("problem %d is %q, want it to contain %q", i, j.Problems[i], want)
				}
			}
			for run, labels := range tt.labels {
				for test, want := range labels {
					if got := j.Verdicts[run][test].Label; !strings.HasPrefix(got, want) {
						t.Errorf("%s run, %s: label %q, want it to start with %q", run, test, got, want)
					}
				}
			}
			if code := j.Print(&strings.Builder{}); (code == 0) != (len(tt.problems) == 0) {
				t.Errorf("exit code %d with problems %q", code, j.Problems)
			}
		})
	}
}

func TestSkipKnown(t *testing.T) {
	report := &confv1.ConformanceReport{ProfileReports: []confv1.ProfileReport{{
		Name: "GATEWAY-HTTP",
		Core: confv1.Status{Result: confv1.Failure, Statistics: confv1.Statistics{Passed: 5, Failed: 2},
			FailedTests: []string{"Known", "Unexpected"}},
		Extended: &confv1.ExtendedStatus{Status: confv1.Status{Result: confv1.Failure, Statistics: confv1.Statistics{Passed: 1, Failed: 1},
			FailedTests: []string{"KnownExtended"}}},
	}}}
	SkipKnown(report, map[string]Verdict{
		"Known":         {Label: "failed as known"},
		"KnownExtended": {Label: "failed as known"},
		"Unexpected":    {Label: "failed (unexpectedly)", Unexpected: "failed"},
	})
	want := []confv1.ProfileReport{{
		Name: "GATEWAY-HTTP",
		Core: confv1.Status{Result: confv1.Failure, Statistics: confv1.Statistics{Passed: 5, Failed: 1, Skipped: 1},
			FailedTests: []string{"Unexpected"}, SkippedTests: []string{"Known"}},
		Extended: &confv1.ExtendedStatus{Status: confv1.Status{Result: confv1.Partial, Statistics: confv1.Statistics{Passed: 1, Skipped: 1},
			SkippedTests: []string{"KnownExtended"}}},
	}}
	if diff := cmp.Diff(want, report.ProfileReports); diff != "" {
		t.Errorf("reports (-want +got):\n%s", diff)
	}
}
