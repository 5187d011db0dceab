// Command localstack is `make run-local`: it starts etcd, kube-apiserver (with the
// Gateway API CRDs) and a Consul dev agent on loopback with the test harness, writes a
// kubeconfig, runs the controller in the foreground against them, applies the examples
// once the controller is up, and stops everything on Ctrl-C.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

func main() {
	stateDir := flag.String("state-dir", "_output/local", "where the servers keep data, certificates and logs")
	controller := flag.String("controller", "bin/consul-gateway-controller", "the controller binary to run")
	examples := flag.String("examples", "examples", "manifests to apply once the controller runs")
	verbosity := flag.Int("v", 2, "the controller's klog verbosity")
	flag.Parse()
	if err := run(*stateDir, *controller, *examples, *verbosity); err != nil {
		fmt.Fprintf(os.Stderr, "run-local: %v\n", err)
		os.Exit(1)
	}
}

func run(stateDir, controller, examples string, verbosity int) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	// A state dir from an earlier run holds an etcd of an apiserver whose certificates
	// and tokens are gone; start clean each time.
	if err := os.RemoveAll(stateDir); err != nil {
		return err
	}
	fmt.Println("starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok (one fake Node) and Consul...")
	env, err := testenv.Start(ctx, testenv.Options{StateDir: stateDir, Nodes: 1})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("stopping the servers...")
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	kubeconfig := filepath.Join(env.Dir(), "kubeconfig")
	if err := env.Kube.WriteKubeconfig(kubeconfig, testenv.AdminUser); err != nil {
		return err
	}

	// The controller runs as the tests run it (testenv), its output on the terminal as
	// well as in the logs. The example's backend has no service-defaults of its own;
	// without one saying protocol http, Consul refuses an http-route to it.
	proc, err := env.StartController(testenv.ControllerOptions{
		Binary: controller, Name: "local", Kubeconfig: kubeconfig, Output: os.Stdout,
		Args: []string{fmt.Sprintf("-v=%d", verbosity), "--cluster-id=local", "--manage-service-defaults", "--leader-elect-resource-namespace=default"},
	})
	if err != nil {
		return err
	}
	defer func() {
		if _, err := proc.Terminate(10 * time.Second); err != nil {
			fmt.Fprintf(os.Stderr, "run-local: the controller: %v\n", err)
		}
	}()

	// Give the controller a moment to connect, then apply the examples as a user would.
	select {
	case <-proc.Exited():
		return exited(proc)
	case <-time.After(2 * time.Second):
	}
	kubectl, err := testenv.Kubectl()
	if err != nil {
		return err
	}
	apply := exec.CommandContext(ctx, kubectl, "--kubeconfig="+kubeconfig, "apply", "-f", examples)
	apply.Stdout, apply.Stderr = os.Stdout, os.Stderr
	if err := apply.Run(); err != nil {
		return fmt.Errorf("apply %s: %w", examples, err)
	}
	printGatewayInstances(ctx, env)
	fmt.Printf(`
The local stack is up. Look at it with:
  %[1]s --kubeconfig %[2]s get gatewayclasses,gateways,httproutes -A
  %[1]s --kubeconfig %[2]s -n demo get deployments,pods,services -o wide
  Consul UI: http://%[3]s/ui
Server logs are in %[4]s. Press Ctrl-C to stop everything.

`, kubectl, kubeconfig, env.Consul.HTTPAddr(), filepath.Join(env.Dir(), "logs"))

	select {
	case <-proc.Exited():
		return exited(proc)
	case <-ctx.Done():
		// The deferred Terminate stops it as the kubelet would.
	}
	return nil
}

// exited says that the controller stopped by itself, and how.
func exited(proc *testenv.Controller) error {
	if err := proc.ExitError(); err != nil {
		return fmt.Errorf("the controller exited: %w", err)
	}
	return errors.New("the controller exited")
}

// printGatewayInstances waits up to 30 s for the example Gateway's pods to appear in
// Consul's catalog, and prints them: what a gateway proxy's xDS is served for.
func printGatewayInstances(ctx context.Context, env *testenv.Env) {
	service := translate.Naming{}.EntryName("demo", "edge")
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		entries, _, err := env.ConsulClient.Health().Service(service, "", false, nil)
		if err == nil && len(entries) > 0 {
			for _, e := range entries {
				status := "no check"
				if len(e.Checks) > 0 {
					status = e.Checks.AggregatedStatus()
				}
				fmt.Printf("Consul catalog: %s instance %s of %s on node %s at %s (%s)\n",
					e.Service.Kind, e.Service.ID, e.Service.Service, e.Node.Node, e.Service.Address, status)
			}
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	fmt.Printf("Consul catalog: no instance of %s yet\n", service)
}
