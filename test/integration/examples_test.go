package integration

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/cli"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

var updateExamples = flag.Bool("update-examples", false, "rewrite testdata/examples/*.verdicts.yaml from the translate command")

// examplesResponder is the responder's Consul service in the redirect example's runs,
// the chart's default (responder.service).
const examplesResponder = "consul-gateway-controller-responder"

// example is one directory of examples/ and what running it needs.
type example struct {
	dir string
	// flags are the controller's, beyond the defaults.
	flags []string
	// tlsSecret is a kubernetes.io/tls Secret (namespace/name) the example's README
	// tells the user to make; the test makes it with a certificate for tlsHost.
	tlsSecret, tlsHost string
	// httpBackends are the Consul services the example's HTTPRoutes send to, which
	// their owners declare http (examples/README.md).
	httpBackends []string
	// responder: the example needs the responder running.
	responder bool
}

var examples = []example{
	{dir: "https", tlsSecret: "example-https/web-tls", tlsHost: "web.example.com", httpBackends: []string{"web"}},
	{dir: "tcp"},
	{dir: "cross-namespace", httpBackends: []string{"storefront", "inventory"}},
	{dir: "redirect", flags: []string{"--responder-service=" + examplesResponder}, responder: true},
}

// TestExamplesTranslate: translate, the offline command, accepts each example of
// examples/ under the chart's GatewayClass with the verdicts in
// testdata/examples/<dir>.verdicts.yaml (-update-examples rewrites them): every
// Gateway, listener and route accepted and resolved, Programmed pending Consul.
func TestExamplesTranslate(t *testing.T) {
	class := chartClassFile(t)
	for _, x := range examples {
		t.Run(x.dir, func(t *testing.T) {
			args := append(slices.Clone(x.flags), "-o", "json", "-f", class)
			for _, f := range x.files(t) {
				args = append(args, "-f", f)
			}
			if x.tlsSecret != "" {
				args = append(args, "-f", x.secretFile(t))
			}
			var stdout, stderr bytes.Buffer
			if code := cli.Translate(args, nil, &stdout, &stderr); code != 0 {
				t.Fatalf("translate %v: exit %d: %s\n%s", args, code, stderr.String(), stdout.String())
			}
			got := translateVerdicts(t, stdout.Bytes())
			path := filepath.Join("testdata", "examples", x.dir+".verdicts.yaml")
			if *updateExamples {
				writeVerdicts(t, path, x.dir, got)
				return
			}
			var want map[string]string
			readYAML(t, path, &want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("translate's verdicts on examples/%s (-%s +got):\n%s", x.dir, path, diff)
			}
		})
	}
}

// TestExamplesReachProgrammed applies each example with kubectl, as its README says,
// to the real API server, with the chart's GatewayClass (its GatewayConfig set to a
// ClusterIP Service: this cluster has no load balancer) and the controller running
// against the real Consul (and the responder for the redirect): every Gateway and
// route reaches Accepted and Programmed, Consul accepting each entry.
func TestExamplesReachProgrammed(t *testing.T) {
	admin := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.Kube.WriteKubeconfig(admin, testenv.AdminUser); err != nil {
		t.Fatal(err)
	}
	for _, x := range examples {
		t.Run(x.dir, func(t *testing.T) {
			clusterID := "examples-" + utilrand.String(5)
			args := append([]string{"--cluster-id=" + clusterID}, x.flags...)
			if x.responder {
				testenv.StartResponder(t, env.Consul, testenv.ResponderOptions{
					Binary: testenv.ControllerBinary(t), Service: examplesResponder, ServiceID: examplesResponder + "-" + clusterID, LogDir: env.LogDir(),
				})
			}
			for _, backend := range x.httpBackends {
				declareHTTPBackend(t, backend)
			}
			p := env.RunController(t, testenv.ControllerOptions{Name: clusterID, Args: args})
			// Cleanups run last first: the example goes, then the class, while the
			// controller still runs to finish them.
			applyChartClass(t, admin)
			for _, f := range x.files(t) {
				if out, err := kubectl(t, admin, "apply", "-f", f); err != nil {
					t.Fatalf("kubectl apply -f %s: %v\n%s", f, err, out)
				}
			}
			t.Cleanup(func() {
				for _, f := range x.files(t) {
					_, _ = kubectl(t, admin, "delete", "-f", f, "--ignore-not-found", "--timeout=60s")
				}
			})
			if x.tlsSecret != "" {
				ns, name, _ := strings.Cut(x.tlsSecret, "/")
				cert, key := testenv.SelfSigned(t, x.tlsHost)
				env.Create(t, testenv.TLSSecret(ns, name, cert, key))
			}
			objects := x.gatewayAPIObjects(t)
			testenv.Eventually(t, 90*time.Second, "examples/"+x.dir+" Accepted and Programmed", func(ctx context.Context) error {
				if !p.Running() {
					t.Fatalf("the controller exited: %v\n%s", p.ExitError(), testenv.Tail(p.Output(), 30))
				}
				for _, obj := range objects {
					if err := programmed(ctx, obj); err != nil {
						return err
					}
				}
				return nil
			})
		})
	}
}

// files are the example's manifests.
func (x example) files(t *testing.T) []string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "examples", x.dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("examples/%s: %v %v", x.dir, files, err)
	}
	return files
}

// secretFile is the example's TLS Secret as a manifest, with a certificate made now.
func (x example) secretFile(t *testing.T) string {
	t.Helper()
	ns, name, _ := strings.Cut(x.tlsSecret, "/")
	cert, key := testenv.SelfSigned(t, x.tlsHost)
	data, err := yaml.Marshal(testenv.TLSSecret(ns, name, cert, key))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "secret.yaml")
	if err := os.WriteFile(path, append([]byte("apiVersion: v1\nkind: Secret\n"), data...), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// gatewayAPIObjects are the example's Gateways and routes.
func (x example) gatewayAPIObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	var objects []*unstructured.Unstructured
	for _, f := range x.files(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		decoded, err := decodeObjects(string(data))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, obj := range decoded {
			if strings.HasPrefix(obj.GetAPIVersion(), "gateway.networking.k8s.io/") && obj.GetKind() != "ReferenceGrant" {
				objects = append(objects, obj)
			}
		}
	}
	if len(objects) == 0 {
		t.Fatalf("examples/%s has no Gateway or route", x.dir)
	}
	return objects
}

// programmed checks the object as the API server holds it: a Gateway Accepted and
// Programmed, a route Accepted, ResolvedRefs and ConsulAccepted on each parent.
func programmed(ctx context.Context, obj *unstructured.Unstructured) error {
	gw := env.GatewayClient.GatewayV1()
	what := obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
	var parents []gatewayv1.RouteParentStatus
	switch obj.GetKind() {
	case "Gateway":
		got, err := gw.Gateways(obj.GetNamespace()).Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		return conditionsTrue(what, got.Status.Conditions, "Accepted", "Programmed")
	case "HTTPRoute":
		got, err := gw.HTTPRoutes(obj.GetNamespace()).Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		parents = got.Status.Parents
	case "TCPRoute":
		got, err := gw.TCPRoutes(obj.GetNamespace()).Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		parents = got.Status.Parents
	default:
		return fmt.Errorf("%s: no check for this kind", what)
	}
	if len(parents) == 0 {
		return fmt.Errorf("%s: no parent status yet", what)
	}
	for _, parent := range parents {
		if err := conditionsTrue(what+" parent "+string(parent.ParentRef.Name), parent.Conditions,
			"Accepted", "ResolvedRefs", "consul-gateway-controller.github.io/ConsulAccepted"); err != nil {
			return err
		}
	}
	return nil
}

func conditionsTrue(what string, conditions []metav1.Condition, types ...string) error {
	for _, typ := range types {
		if !meta.IsStatusConditionTrue(conditions, typ) {
			return fmt.Errorf("%s: %s not True: %v", what, typ, meta.FindStatusCondition(conditions, typ))
		}
	}
	return nil
}

// chartClassFile is the chart's GatewayClass and GatewayConfig, as helm renders them
// with a ClusterIP Service (this cluster has no load balancer), in a file.
func chartClassFile(t *testing.T) string {
	t.Helper()
	out, err := helm(t, "", append(templateArgs(t, "managedGatewayClass.serviceType=ClusterIP"), "--show-only=templates/gatewayclass.yaml")...)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	path := filepath.Join(t.TempDir(), "class.yaml")
	if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// applyChartClass applies the chart's GatewayClass and GatewayConfig (chartClassFile)
// in the chart's namespace, deleted when t ends (within 30 s).
func applyChartClass(t *testing.T, kubeconfig string) {
	t.Helper()
	class := chartClassFile(t)
	if out, err := kubectl(t, kubeconfig, "create", "namespace", deployNamespace); err != nil && !strings.Contains(out+err.Error(), "AlreadyExists") {
		t.Fatalf("kubectl create namespace: %v\n%s", err, out)
	}
	if out, err := kubectl(t, kubeconfig, "apply", "-f", class); err != nil {
		t.Fatalf("kubectl apply the chart's class: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = kubectl(t, kubeconfig, "delete", "-f", class, "--ignore-not-found", "--timeout=30s") })
}

// declareHTTPBackend writes service's service-defaults with protocol http, as its
// owner does (examples/README.md), deleted when t ends.
func declareHTTPBackend(t *testing.T, service string) {
	t.Helper()
	entries := env.ConsulClient.ConfigEntries()
	if _, _, err := entries.Set(&consulapi.ServiceConfigEntry{Kind: consulapi.ServiceDefaults, Name: service, Protocol: "http"}, nil); err != nil {
		t.Fatalf("service-defaults %s: %v", service, err)
	}
	t.Cleanup(func() { _, _ = entries.Delete(consulapi.ServiceDefaults, service, nil) })
}

// translateVerdicts is every condition translate printed, keyed by what it is about
// ("<Kind> <ns>/<name>[ listener <name>][ parent <name>] <type>"), as "<status>/<reason>".
func translateVerdicts(t *testing.T, out []byte) map[string]string {
	t.Helper()
	var result struct {
		Objects []struct {
			Kind, Name, Namespace string
			Status                struct {
				Conditions []metav1.Condition
				Listeners  []struct {
					Name       string
					Conditions []metav1.Condition
				}
				Parents []struct {
					ParentRef  struct{ Name string }
					Conditions []metav1.Condition
				}
			}
		}
		Refused []any
	}
	if err := yaml.Unmarshal(out, &result); err != nil {
		t.Fatalf("translate's output: %v\n%s", err, out)
	}
	if len(result.Refused) > 0 {
		t.Errorf("translate refused %v", result.Refused)
	}
	verdicts := map[string]string{}
	add := func(what string, conditions []metav1.Condition) {
		for _, c := range conditions {
			verdicts[what+" "+c.Type] = string(c.Status) + "/" + c.Reason
		}
	}
	for _, o := range result.Objects {
		what := o.Kind + " " + strings.TrimPrefix(o.Namespace+"/"+o.Name, "/")
		add(what, o.Status.Conditions)
		for _, l := range o.Status.Listeners {
			add(what+" listener "+l.Name, l.Conditions)
		}
		for _, p := range o.Status.Parents {
			add(what+" parent "+p.ParentRef.Name, p.Conditions)
		}
	}
	return verdicts
}

func writeVerdicts(t *testing.T, path, dir string, verdicts map[string]string) {
	t.Helper()
	keys := make([]string, 0, len(verdicts))
	for k := range verdicts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "# translate's verdicts on examples/%s under the chart's GatewayClass:\n# <object> <condition type>: <status>/<reason>. TestExamplesTranslate -update-examples writes it.\n", dir)
	for _, k := range keys {
		line, err := yaml.Marshal(map[string]string{k: verdicts[k]})
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
