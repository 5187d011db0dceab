package xds

import (
	"os"
	"testing"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{Nodes: 1}, &env))
}
