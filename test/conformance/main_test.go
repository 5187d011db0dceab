// Package conformance runs the Gateway API conformance suite (its own Go module: the
// suite needs controller-runtime, which the product never imports) against the
// controller, a real Consul and the container-free cluster of testenv.
package conformance

import (
	"os"
	"testing"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{Nodes: 1}, &env))
}
