// Package integration holds the smoke tests that prove the harness: the real
// kube-apiserver with the Gateway API CRDs and the real Consul agent answer as a user's
// servers would.
package integration

import (
	"os"
	"testing"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{Users: []string{"viewer"}}, &env))
}
