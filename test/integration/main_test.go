// Package integration holds the smoke tests that prove the harness: the real
// kube-apiserver with the Gateway API CRDs and the real Consul agent answer as a user's
// servers would.
package integration

import (
	"flag"
	"os"
	"testing"

	"k8s.io/klog/v2"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	// Informers list with LIST and then WATCH, as they do against API servers without
	// streaming lists: the path where client-go logs response bodies at -v=8 and up,
	// which TestConsulACLs checks for key material.
	if err := os.Setenv("KUBE_FEATURE_WatchListClient", "false"); err != nil {
		panic(err)
	}
	// TEST_V=4 shows the in-process controllers' logs at that verbosity.
	if v := os.Getenv("TEST_V"); v != "" {
		var fs flag.FlagSet
		klog.InitFlags(&fs)
		if err := fs.Set("v", v); err != nil {
			panic(err)
		}
	}
	// One fake Node: the deploy tests run the controller as deployed, gateway pods
	// included.
	os.Exit(testenv.Main(m, testenv.Options{Users: []string{"viewer"}, Nodes: 1}, &env))
}
