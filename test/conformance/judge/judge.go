// Package judge holds a run of the conformance suite to its known failures. The run's
// exit status is not its verdict: known failures fail their tests on purpose, and Go's
// testing cannot undo a failure. So make test-conformance runs the suite's binary with
// -test.v=test2json, turns its output into events (go tool test2json), and judges the
// events: each known failure must fail with its failure (a pattern of the failing
// request or condition, matched against the test's output), and nothing else may fail.
package judge

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

const (
	// StatusRun and TrafficRun are the runs of the suite: status only, and with
	// every request answered from the xDS.
	StatusRun  = "status"
	TrafficRun = "traffic"
	// ErrorMarker starts a line a run prints for a failure of its own (not of a
	// suite test): the judge fails the run on any.
	ErrorMarker = "conformance: error: "
	// FinishedMarker starts the binary's last line; without it the binary died (a
	// panic, a timeout) and its events are incomplete.
	FinishedMarker = "conformance: finished"
)

// RunOfTest is the run each top-level test of the suite's binary is.
var RunOfTest = map[string]string{"TestConformance": StatusRun, "TestConformanceTraffic": TrafficRun}

// A Known failure is a test of the suite known to fail, with the failure it must fail
// with. When a fix lands, the judge says which entry to remove.
type Known struct {
	Test string
	// StatusToo: the failure is a status assertion, which both runs make (the
	// traffic run asserts the same status before its requests). Otherwise only the
	// traffic run meets it.
	StatusToo bool
	// Failure matches the failing request or condition in the test's output. Its
	// subexpressions, or the whole match where it has none, are what the tables print.
	Failure *regexp.Regexp
	// Why is the cause, in a sentence a maintainer can check against the sources.
	Why string
}

// In are the known failures a run meets, by test.
func In(known []Known, run string) map[string]Known {
	out := map[string]Known{}
	for _, k := range known {
		if k.StatusToo || run == TrafficRun {
			out[k.Test] = k
		}
	}
	return out
}

// Matched is what of the test's output the failure pattern matched, for the tables:
// its subexpressions joined, or the whole match; "" when it did not match.
func (k Known) Matched(output string) string {
	m := k.Failure.FindStringSubmatch(output)
	if m == nil {
		return ""
	}
	parts := m[1:]
	if len(parts) == 0 {
		parts = m[:1]
	}
	var kept []string
	for _, p := range parts {
		if p = strings.Join(strings.Fields(p), " "); p != "" {
			kept = append(kept, p)
		}
	}
	return Truncate(strings.Join(kept, " … "), 200)
}

// Truncate cuts s to n bytes, marking the cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// testEvent is one line of go tool test2json's output.
type testEvent struct {
	Action string
	Test   string
	Output string
}

// testRecord is what became of one test: its final action and all its output, its
// subtests' included.
type testRecord struct {
	action string
	output strings.Builder
}

// Events are a run's test records by run and suite test, with the output outside
// any test.
type Events struct {
	tops      map[string]*testRecord            // by run
	tests     map[string]map[string]*testRecord // by run, then suite test
	unowned   strings.Builder
	sawFinish bool
}

// ReadEvents reads go tool test2json's events of the suite's binary.
func ReadEvents(r io.Reader) (*Events, error) {
	ev := &Events{tops: map[string]*testRecord{}, tests: map[string]map[string]*testRecord{}}
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 1<<20), 16<<20)
	for scanner.Scan() {
		var e testEvent
		if err := json.Unmarshal(scanner.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("test2json event %q: %w", Truncate(scanner.Text(), 80), err)
		}
		ev.add(e)
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("read test2json events: %w", err)
	}
	return ev, nil
}

func (ev *Events) add(e testEvent) {
	if strings.HasPrefix(e.Output, FinishedMarker) {
		ev.sawFinish = true
	}
	parts := strings.SplitN(e.Test, "/", 3)
	run, ok := RunOfTest[parts[0]]
	if !ok {
		ev.unowned.WriteString(e.Output)
		return
	}
	rec := ev.record(run, parts)
	rec.output.WriteString(e.Output)
	// Only a test's own pass, fail or skip is its outcome, not its subtests'.
	if len(parts) <= 2 && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip") {
		rec.action = e.Action
	}
}

// record is the record a test's event belongs to: its run's, or its suite test's.
func (ev *Events) record(run string, parts []string) *testRecord {
	if len(parts) == 1 {
		if ev.tops[run] == nil {
			ev.tops[run] = &testRecord{}
		}
		return ev.tops[run]
	}
	if ev.tests[run] == nil {
		ev.tests[run] = map[string]*testRecord{}
	}
	rec := ev.tests[run][parts[1]]
	if rec == nil {
		rec = &testRecord{}
		ev.tests[run][parts[1]] = rec
	}
	return rec
}

// Verdict is the judge's word on one suite test of a run that failed or was known to.
type Verdict struct {
	// Label replaces the run's "failed" in the tables.
	Label string
	// Unexpected says what is wrong; "" when the test failed as known.
	Unexpected string
}

// Judgement is the judge's word on a whole binary run.
type Judgement struct {
	Verdicts map[string]map[string]Verdict // by run, then test
	Problems []string                      // everything unexpected, for the exit status
}

// Judge holds every run the events hold to the known failures.
func Judge(ev *Events, known []Known) Judgement {
	j := Judgement{Verdicts: map[string]map[string]Verdict{}}
	if !ev.sawFinish {
		j.Problems = append(j.Problems, "the binary did not finish (a panic or a timeout?): its last lines:\n"+lastLines(ev.unowned.String(), 20))
	}
	j.Problems = append(j.Problems, markedErrors(ev)...)
	if len(ev.tops) == 0 {
		j.Problems = append(j.Problems, "no run of the suite in the events")
	}
	for _, run := range []string{StatusRun, TrafficRun} {
		if ev.tops[run] == nil {
			continue
		}
		j.Verdicts[run] = map[string]Verdict{}
		j.judgeRun(run, ev, In(known, run))
	}
	return j
}

func (j *Judgement) judgeRun(run string, ev *Events, known map[string]Known) {
	anyFailed := false
	for name, rec := range ev.tests[run] {
		k, isKnown := known[name]
		v := judgeTest(rec, k, isKnown)
		if rec.action == "fail" {
			anyFailed = true
		}
		if v.Label == "" {
			continue
		}
		j.Verdicts[run][name] = v
		if v.Unexpected != "" {
			j.Problems = append(j.Problems, fmt.Sprintf("%s run, %s: %s", run, name, v.Unexpected))
		}
	}
	for _, name := range sortedKeys(known) {
		if _, ran := ev.tests[run][name]; !ran {
			j.Problems = append(j.Problems, fmt.Sprintf("%s run, %s: known to fail, but it did not run", run, name))
		}
	}
	// A run fails with any failure of its tests; failing with none, it failed itself.
	if ev.tops[run].action == "fail" && !anyFailed {
		j.Problems = append(j.Problems, fmt.Sprintf("%s run failed outside the suite's tests:\n%s", run, lastLines(ev.tops[run].output.String(), 20)))
	}
}

// judgeTest is the verdict on one test; a zero verdict for a test that was neither
// known nor failed.
func judgeTest(rec *testRecord, k Known, isKnown bool) Verdict {
	output := rec.output.String()
	switch {
	case rec.action == "fail" && isKnown:
		if matched := k.Matched(output); matched != "" {
			return Verdict{Label: "failed as known: " + k.Why + "; the failure: `" + matched + "`"}
		}
		return Verdict{
			Label:      "failed (unexpectedly: not with its known failure)",
			Unexpected: fmt.Sprintf("known to fail with %q, it failed otherwise:\n%s", k.Failure, failureLines(output)),
		}
	case rec.action == "fail":
		return Verdict{Label: "failed (unexpectedly)", Unexpected: "failed:\n" + failureLines(output)}
	case isKnown && rec.action == "pass":
		return Verdict{
			Label:      "passed (a known failure: remove it from the table)",
			Unexpected: "known to fail, it passed: remove it from the known failures (test/conformance/known_test.go)",
		}
	case isKnown:
		return Verdict{
			Label:      "skipped (a known failure that did not run)",
			Unexpected: "known to fail, it was skipped, so its failure was not checked",
		}
	}
	return Verdict{}
}

// markedErrors are the lines the run printed for failures of its own.
func markedErrors(ev *Events) []string {
	var out []string
	all := ev.unowned.String()
	for _, rec := range ev.tops {
		all += rec.output.String()
	}
	for line := range strings.Lines(all) {
		if _, after, ok := strings.Cut(line, ErrorMarker); ok {
			out = append(out, strings.TrimSpace(after))
		}
	}
	return out
}

// failureLines are the lines of a test's output that say why it failed, or its last
// lines when none says.
func failureLines(output string) string {
	var kept []string
	for line := range strings.Lines(output) {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "Error:") || strings.HasPrefix(t, "--- FAIL") || strings.Contains(t, "timeout while waiting") ||
			strings.Contains(t, "not ready yet") || strings.Contains(t, "Condition never satisfied") {
			kept = append(kept, Truncate(t, 400))
		}
	}
	if len(kept) == 0 {
		return lastLines(output, 20)
	}
	if len(kept) > 12 {
		kept = append(kept[:4], append([]string{"…"}, kept[len(kept)-8:]...)...)
	}
	return "  " + strings.Join(kept, "\n  ")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Print writes the verdicts and says whether the run is as expected (0) or not (1).
func (j Judgement) Print(w io.Writer) int {
	for _, run := range sortedKeys(j.Verdicts) {
		for _, name := range sortedKeys(j.Verdicts[run]) {
			if v := j.Verdicts[run][name]; v.Unexpected == "" {
				fmt.Fprintf(w, "conformance judge: %s run, %s: %s\n", run, name, v.Label)
			}
		}
	}
	if len(j.Problems) == 0 {
		fmt.Fprintf(w, "conformance judge: as expected: every failure is a known one, with its known failure\n")
		return 0
	}
	for _, p := range j.Problems {
		fmt.Fprintf(w, "conformance judge: UNEXPECTED: %s\n", p)
	}
	fmt.Fprintf(w, "conformance judge: %d unexpected outcomes\n", len(j.Problems))
	return 1
}
