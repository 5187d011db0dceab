// Package conformance runs the Gateway API conformance suite (its own Go module: the
// suite needs controller-runtime, which the product never imports) against the
// controller, a real Consul and the container-free cluster of testenv: once judging
// status only, once with every request answered from the xDS Consul serves.
package conformance

import (
	"fmt"
	"os"
	"testing"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	guardNetwork()
	code := testenv.Main(m, testenv.Options{Nodes: 1}, &env)
	if *reportDir != "" {
		if err := results.writeREADME(*reportDir); err != nil {
			fmt.Fprintf(os.Stderr, "conformance: %v\n", err)
			code = 1
		}
	}
	if dials := offLoopbackDials(); len(dials) > 0 {
		fmt.Fprintf(os.Stderr, "conformance: dials off loopback were attempted (and refused): %v\n", dials)
		code = 1
	}
	os.Exit(code)
}
