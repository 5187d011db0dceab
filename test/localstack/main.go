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
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/identity"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

func main() {
	stateDir := flag.String("state-dir", "_output/local", "where the servers keep data, certificates and logs")
	controller := flag.String("controller", "bin/consul-gateway-controller", "the controller binary to run")
	examples := flag.String("examples", "examples", "manifests to apply once the controller runs")
	verbosity := flag.Int("v", 2, "the controller's klog verbosity")
	secure := flag.Bool("secure", false, "run Consul as production does, with ACLs (default deny) and TLS only; give the controller deploy/'s least-privilege token and --gateway-auth-method, print the example Gateway's ACL role and policy, and write Consul's CA and a read-only token for the commands it prints")
	flag.Parse()
	if err := run(localOptions{stateDir: *stateDir, controller: *controller, examples: *examples, verbosity: *verbosity, secure: *secure}); err != nil {
		fmt.Fprintf(os.Stderr, "run-local: %v\n", err)
		os.Exit(1)
	}
}

// localOptions say how to run the local stack.
type localOptions struct {
	stateDir, controller, examples string
	verbosity                      int
	secure                         bool
}

func run(o localOptions) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	s, err := start(ctx, o, os.Stdout, os.Stdout)
	if s != nil {
		defer s.stop(os.Stdout)
	}
	if err != nil {
		return err
	}
	select {
	case <-s.proc.Exited():
		return exited(s.proc)
	case <-ctx.Done():
		// The deferred Terminate stops it as the kubelet would.
	}
	return nil
}

// localStack is a running local stack: the servers, and the controller once it runs.
type localStack struct {
	env  *testenv.Env
	proc *testenv.Controller
}

// stop terminates the controller and stops the servers, telling out.
func (s *localStack) stop(out io.Writer) {
	if s.proc != nil {
		if _, err := s.proc.Terminate(10 * time.Second); err != nil {
			fmt.Fprintf(os.Stderr, "run-local: the controller: %v\n", err)
		}
	}
	fmt.Fprintln(out, "stopping the servers...")
	if err := s.env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

// start starts the servers and the controller (its output to controllerOut), applies
// the examples, and prints to out how to look at it all. The stack it returns, even
// with an error, is to be stopped.
func start(ctx context.Context, o localOptions, out, controllerOut io.Writer) (*localStack, error) {
	// A state dir from an earlier run holds an etcd of an apiserver whose certificates
	// and tokens are gone; start clean each time.
	if err := os.RemoveAll(o.stateDir); err != nil {
		return nil, err
	}
	fmt.Fprintln(out, "starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok (one fake Node) and Consul...")
	env, err := testenv.Start(ctx, testenv.Options{StateDir: o.stateDir, Nodes: 1, ConsulACL: o.secure, ConsulTLS: o.secure})
	if err != nil {
		return nil, err
	}
	s := &localStack{env: env}
	kubeconfig := filepath.Join(env.Dir(), "kubeconfig")
	if err := env.Kube.WriteKubeconfig(kubeconfig, testenv.AdminUser); err != nil {
		return s, err
	}

	// The controller runs as the tests run it (testenv), its output on the terminal as
	// well as in the logs, with the chart's defaults: no --manage-service-defaults.
	// The example's backend is declared http in Consul, as its owner would in a
	// cluster (docs/consul-k8s.md, "Service defaults").
	if err := declareHTTP(env, "echo"); err != nil {
		return s, err
	}
	opts := testenv.ControllerOptions{
		Binary: o.controller, Name: "local", Kubeconfig: kubeconfig, Output: controllerOut,
		Args: []string{fmt.Sprintf("-v=%d", o.verbosity), "--cluster-id=local", "--leader-elect-resource-namespace=default"},
	}
	if o.secure {
		if err := secureController(ctx, env, &opts, out); err != nil {
			return s, err
		}
	}
	if s.proc, err = env.StartController(opts); err != nil {
		return s, err
	}

	// Give the controller a moment to connect, then apply the examples as a user would.
	select {
	case <-s.proc.Exited():
		return s, exited(s.proc)
	case <-time.After(2 * time.Second):
	}
	kubectl, err := testenv.Kubectl()
	if err != nil {
		return s, err
	}
	apply := exec.CommandContext(ctx, kubectl, "--kubeconfig="+kubeconfig, "apply", "-f", o.examples)
	apply.Stdout, apply.Stderr = out, out
	if err := apply.Run(); err != nil {
		return s, fmt.Errorf("apply %s: %w", o.examples, err)
	}
	consulFlags := "--consul-http-addr " + env.Consul.URL()
	if o.secure {
		if err := trustConsulCA(ctx, env); err != nil {
			return s, err
		}
		if consulFlags, err = readerCredentials(env); err != nil {
			return s, err
		}
	}
	printGatewayInstances(ctx, env, out)
	if o.secure {
		printGatewayIdentity(ctx, env, out)
	}
	fmt.Fprintf(out, `
The local stack is up. Look at it with:
  %[1]s --kubeconfig %[2]s get gatewayclasses,gateways,httproutes -A
  %[1]s --kubeconfig %[2]s -n demo get deployments,pods,services -o wide
  Consul UI: %[3]s/ui
Ask the controller's own commands (docs/cli.md):
  %[5]s status -A --kubeconfig %[2]s %[7]s --cluster-id=local
  %[5]s explain route demo/echo --kubeconfig %[2]s %[7]s --cluster-id=local
  %[5]s collect -A --out %[8]s --pod-logs=false --kubeconfig %[2]s %[7]s --cluster-id=local
  (collect does not ask for the pods' logs here: kwok fakes their node, which has no
  kubelet, and the API server would dial the fake node's address for them)
  %[5]s translate -f %[6]s
Server logs are in %[4]s. Press Ctrl-C to stop everything.

`, kubectl, kubeconfig, env.Consul.URL(), filepath.Join(env.Dir(), "logs"), o.controller, o.examples, consulFlags,
		filepath.Join(env.Dir(), "support-bundle.tar.gz"))
	return s, nil
}

// readerPolicy is what the printed commands may read in the secure stack's Consul:
// entries and their status (mesh), service instances and nodes (explain, collect),
// ACL objects (collect lists the gateways' identities, never a token's secret), and
// the agent's own configuration (collect records Consul's version).
const readerPolicy = `mesh = "read"
service_prefix "" { policy = "read" }
node_prefix "" { policy = "read" }
acl = "read"
agent_prefix "" { policy = "read" }
`

// readerCredentials writes, in the stack's directory, Consul's CA certificate and a
// token of readerPolicy, and returns the flags that make the commands use them.
func readerCredentials(env *testenv.Env) (string, error) {
	caFile := filepath.Join(env.Dir(), "consul-ca.pem")
	if err := os.WriteFile(caFile, env.Consul.CACertPEM(), 0o600); err != nil {
		return "", fmt.Errorf("write Consul's CA: %w", err)
	}
	token, err := testenv.CreateACLToken(env.ConsulClient, "consul-gateway-controller-reader", readerPolicy)
	if err != nil {
		return "", fmt.Errorf("create the commands' read-only token: %w", err)
	}
	tokenFile := filepath.Join(env.Dir(), "consul-reader.token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		return "", fmt.Errorf("write the commands' token: %w", err)
	}
	return fmt.Sprintf("--consul-http-addr %s --consul-cacert %s --consul-token-file %s", env.Consul.URL(), caFile, tokenFile), nil
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
func printGatewayInstances(ctx context.Context, env *testenv.Env, out io.Writer) {
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
				fmt.Fprintf(out, "Consul catalog: %s instance %s of %s on node %s at %s (%s)\n",
					e.Service.Kind, e.Service.ID, e.Service.Service, e.Node.Node, e.Service.Address, status)
			}
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	fmt.Fprintf(out, "Consul catalog: no instance of %s yet\n", service)
}

// gatewayAuthMethod is the auth method the secure stack's gateway pods log in to.
const gatewayAuthMethod = "consul-gateway-pods"

// secureController sets up what deploy/README.md section 5 tells an operator to: the
// Kubernetes auth method, and a controller token with deploy/'s policies; the
// controller then manages the gateways' identities.
func secureController(ctx context.Context, env *testenv.Env, opts *testenv.ControllerOptions, out io.Writer) error {
	if err := env.CreateKubernetesAuthMethod(ctx, env.ConsulClient, gatewayAuthMethod); err != nil {
		return err
	}
	rules, err := testenv.DeployPolicies("consul-acl-policy.hcl", "consul-acl-policy-identities.hcl")
	if err != nil {
		return err
	}
	token, err := testenv.CreateACLToken(env.ConsulClient, "consul-gateway-controller", rules)
	if err != nil {
		return fmt.Errorf("create the controller's token: %w", err)
	}
	_, grpcPort, err := net.SplitHostPort(env.Consul.GRPCTLSAddr())
	if err != nil {
		return err
	}
	opts.ConsulToken = token
	opts.Args = append(opts.Args, "--gateway-auth-method="+gatewayAuthMethod, "--gateway-consul-grpc-port="+grpcPort)
	fmt.Fprintf(out, "Consul: ACLs on (default deny), TLS only; the controller's token holds deploy/'s policies; gateway pods log in to the auth method %s\n", gatewayAuthMethod)
	return nil
}

// trustConsulCA gives the example's gateway pods Consul's CA, as an operator would: a
// Secret in their namespace, named by the GatewayConfig.
func trustConsulCA(ctx context.Context, env *testenv.Env) error {
	const namespace, secret = "demo", "consul-ca"
	if _, err := env.KubeClient.CoreV1().Secrets(namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: secret},
		Data:       map[string][]byte{corev1.ServiceAccountRootCAKey: env.Consul.CACertPEM()},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create Secret %s/%s: %w", namespace, secret, err)
	}
	configs := env.ConfigClient.GatewayConfigs(namespace)
	config, err := configs.Get(ctx, "local", metav1.GetOptions{})
	if err != nil {
		return err
	}
	config.Spec.Consul = &v1alpha1.ConsulConnection{TLS: &v1alpha1.ConsulTLS{CASecretName: secret, ServerName: testenv.ConsulServerName}}
	_, err = configs.Update(ctx, config, metav1.UpdateOptions{})
	return err
}

// printGatewayIdentity waits up to 30 s for the example Gateway's ACL objects, and
// prints them: what its pods get when they log in.
func printGatewayIdentity(ctx context.Context, env *testenv.Env, out io.Writer) {
	namer := identity.Namer{Ownership: translate.Ownership{Controller: string(gwsync.DefaultControllerName), ClusterID: "local"}}
	name := namer.Name(cache.ObjectName{Namespace: "demo", Name: "edge"})
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		policy, _, perr := env.ConsulClient.ACL().PolicyReadByName(name, nil)
		role, _, rerr := env.ConsulClient.ACL().RoleReadByName(name, nil)
		rules, _, berr := env.ConsulClient.ACL().BindingRuleList(gatewayAuthMethod, nil)
		if perr == nil && rerr == nil && berr == nil && policy != nil && role != nil {
			for _, r := range rules {
				if r.BindName == name {
					fmt.Fprintf(out, "Consul ACL: role %s (policy %s), bound by the auth method %s to %s\nPolicy %s:\n%s\n",
						role.Name, policy.Name, gatewayAuthMethod, r.Selector, policy.Name, policy.Rules)
					return
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	fmt.Fprintf(out, "Consul ACL: no identity for demo/edge yet (role and policy %s)\n", name)
}
