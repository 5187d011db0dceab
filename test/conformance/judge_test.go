package conformance

import (
	"fmt"
	"os"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/conformance/judge"
)

// judgeMain is the binary's -judge mode: it judges the events file and, with
// -report-dir, writes the tables and the reports from the run's results.
func judgeMain() int {
	f, err := os.Open(*judgeEvents)
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance judge: %v\n", err)
		return 1
	}
	defer f.Close()
	ev, err := judge.ReadEvents(f)
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance judge: %v\n", err)
		return 1
	}
	j := judge.Judge(ev, knownFailures)
	if *reportDir != "" {
		if err := publish(*reportDir, *resultsFile, j); err != nil {
			j.Problems = append(j.Problems, err.Error())
		}
	}
	return j.Print(os.Stdout)
}
