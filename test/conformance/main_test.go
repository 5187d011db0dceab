// Package conformance runs the Gateway API conformance suite (its own Go module: the
// suite needs controller-runtime, which the product never imports) against the
// controller, a real Consul and the container-free cluster of testenv: once judging
// status only, once with every request answered from the xDS Consul serves. The same
// binary, with -judge, holds the runs' outcomes to the known failures (judge_test.go).
package conformance

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/conformance/judge"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

var (
	judgeEvents = flag.String("judge", "", "judge the runs in this go tool test2json events file against the known failures, start nothing, "+
		"and with -report-dir write the tables and reports there from -results")
	resultsFile = flag.String("results", "", "write (run) or read (-judge) the outcomes of each test here, for the tables")
)

var env *testenv.Env

func TestMain(m *testing.M) {
	flag.Parse()
	if *judgeEvents != "" {
		os.Exit(judgeMain())
	}
	guardNetwork()
	results.Commit = commitOf()
	code := testenv.Main(m, testenv.Options{Nodes: 1}, &env)
	if *resultsFile != "" {
		if err := results.write(*resultsFile); err != nil {
			fmt.Printf("%s%v\n", judge.ErrorMarker, err)
			code = 1
		}
	}
	if dials := offLoopbackDials(); len(dials) > 0 {
		fmt.Printf("%sdials off loopback were attempted (and refused): %v\n", judge.ErrorMarker, dials)
		code = 1
	}
	fmt.Printf("%s at commit %s, exit code %d (not the verdict: the judge's is)\n", judge.FinishedMarker, results.Commit, code)
	os.Exit(code)
}
