// Package dataplane tests what a Gateway becomes in the cluster: its gateway
// Deployment, Service and address. It runs against a cluster that really schedules
// and readies pods without containers (testenv's Workloads: kube-controller-manager,
// kube-scheduler and kwok), next to the real kube-apiserver and Consul.
package dataplane

import (
	"os"
	"testing"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{Nodes: 1}, &env))
}
