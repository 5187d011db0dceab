package judge

import (
	"slices"

	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
)

// SkipKnown moves the tests that failed as known from failed to skipped, and sets each
// result again as the suite does: failure with a failure left, partial with a skip.
func SkipKnown(report *confv1.ConformanceReport, verdicts map[string]Verdict) {
	asKnown := func(test string) bool {
		v, ok := verdicts[test]
		return ok && v.Unexpected == ""
	}
	for i := range report.ProfileReports {
		p := &report.ProfileReports[i]
		moveKnown(&p.Core, asKnown)
		if p.Extended != nil {
			moveKnown(&p.Extended.Status, asKnown)
		}
	}
}

func moveKnown(s *confv1.Status, asKnown func(string) bool) {
	var failed []string
	for _, test := range s.FailedTests {
		if !asKnown(test) {
			failed = append(failed, test)
			continue
		}
		s.SkippedTests = append(s.SkippedTests, test)
		s.Failed--
		s.Skipped++
	}
	s.FailedTests = failed
	slices.Sort(s.SkippedTests)
	switch {
	case s.Failed > 0:
		s.Result = confv1.Failure
	case s.Skipped > 0:
		s.Result = confv1.Partial
	default:
		s.Result = confv1.Success
	}
}
