package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/clientcmd"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/cli"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/options"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// controllerRBACKubeconfig is a kubeconfig of a fresh ServiceAccount bound to a copy
// of deploy/'s ClusterRole, the controller's own, as rendered, whose current context
// names namespace.
func controllerRBACKubeconfig(t *testing.T, namespace string) string {
	t.Helper()
	r := renderDeploy(t)
	name := "cli-as-controller-" + utilrand.String(5)
	saNamespace := env.NewNamespace(t, "cli-sa")
	env.Create(t, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: r.clusterRole.Rules})
	env.Create(t, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: saNamespace, Name: name}},
	})
	env.Create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: saNamespace, Name: name}})
	waitAuthorized(t, serviceaccountUser(saNamespace, name), r.clusterRole.Rules[0], "")
	kubeconfig, _ := serviceAccountKubeconfig(t, saNamespace, name, nil)
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Contexts[cfg.CurrentContext].Namespace = namespace
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// TestReaderCommandsAsTheController runs status and explain as they run in the
// controller's pod: with a ServiceAccount bound to deploy/'s ClusterRole alone (list
// and watch, no get), without -n (the kubeconfig's context names the namespace) and
// without --cluster-id (derived from kube-system, read with a list). Then with Consul
// down: the Kubernetes half is printed, "Consul not reached", exit 3. Then with the
// Consul Enterprise flags against Consul CE, which refuses them: exit 3 with Consul's
// words. Then status --problems: nothing and exit 0 while all is well; the broken
// route alone and exit 4 after a route names a Service that does not exist.
func TestReaderCommandsAsTheController(t *testing.T) {
	s := newConsulStack(t, "cli-"+utilrand.String(5))
	env.Create(t, s.Route("web", "web.example.com"))
	// The commands run without --cluster-id: the controller's is the derived one.
	kubeSystem, err := env.KubeClient.CoreV1().Namespaces().Get(t.Context(), metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clusterID := options.ClusterIDOf(kubeSystem.UID)
	startController(t, s.Controller, controllerOptions{consul: &consulOptions{clusterID: clusterID,
		translation: translate.Options{ManageServiceDefaults: true}}})
	waitRouteConsulAccepted(t, s, "web")

	kubeconfig := controllerRBACKubeconfig(t, s.Namespace)
	consulAddr := "--consul-http-addr=" + env.Consul.HTTPAddr()
	flags := []string{"--kubeconfig=" + kubeconfig, "--controller-name=" + string(s.Controller)}
	run := func(consul string, args ...string) testenv.CommandRun {
		return testenv.RunCommand(t, append(append(args, flags...), consul)...)
	}

	status := run(consulAddr, "status")
	if status.Code != 0 {
		t.Fatalf("status as the controller: exit %d\n%s%s", status.Code, status.Stdout, status.Stderr)
	}
	entry := s.naming.EntryName(s.Namespace, "web")
	for _, want := range []string{"Gateway  ", s.GatewayName, "HTTPRoute", "http-route " + entry + " Accepted=True"} {
		if !strings.Contains(status.Stdout, want) {
			t.Errorf("status as the controller does not show %q:\n%s", want, status.Stdout)
		}
	}
	t.Logf("status as the controller:\n%s", status.Stdout)
	explained := run(consulAddr, "explain", "route", "web")
	if explained.Code != 0 || !strings.Contains(explained.Stdout, "HTTPRoute "+s.Namespace+"/web") || !strings.Contains(explained.Stdout, "Consul: accepted") {
		t.Errorf("explain route web as the controller: exit %d\n%s%s", explained.Code, explained.Stdout, explained.Stderr)
	}
	t.Logf("explain as the controller:\n%s", explained.Stdout)

	// Consul down: the cluster's half, and a line saying Consul was not reached.
	down := "--consul-http-addr=http://" + testenv.ClosedLoopbackAddr(t)
	status = run(down, "status")
	if status.Code != cli.ExitConsulNotRead || !strings.Contains(status.Stdout, s.GatewayName) ||
		!strings.Contains(status.Stdout, "(Consul not read)") || !strings.HasPrefix(status.Stderr, "Consul not reached: ") {
		t.Errorf("status with Consul down: exit %d, want %d, the Gateway and \"Consul not reached\"\n%s%s", status.Code, cli.ExitConsulNotRead, status.Stdout, status.Stderr)
	}
	t.Logf("status with Consul down (exit %d):\n%s%s", status.Code, status.Stdout, status.Stderr)
	explained = run(down, "explain", "route", "web")
	if explained.Code != cli.ExitConsulNotRead || !strings.Contains(explained.Stdout, s.GatewayName+": attached") ||
		!strings.Contains(explained.Stdout, "Consul not reached: ") || !strings.Contains(explained.Stdout, "rule 0 (PathPrefix /): served") {
		t.Errorf("explain with Consul down: exit %d, want %d, the parents, rules and \"Consul not reached\"\n%s%s", explained.Code, cli.ExitConsulNotRead, explained.Stdout, explained.Stderr)
	}
	t.Logf("explain with Consul down (exit %d):\n%s%s", explained.Code, explained.Stdout, explained.Stderr)

	// Consul CE refuses the Enterprise parameters the flags send.
	for flag, want := range map[string]string{
		"--consul-partition=team-a":               `Consul refused the query: list Consul's api-gateway entries: Unexpected response code: 400 (Invalid query parameter: "partition" - Partitions are a Consul Enterprise feature)`,
		"--consul-destination-namespace=gateways": `Consul refused the query: list Consul's api-gateway entries: Unexpected response code: 400 (Invalid query parameter: "ns" - Namespaces are a Consul Enterprise feature)`,
		"--consul-mirror-namespaces":              `Consul refused the query: list Consul's api-gateway entries: Unexpected response code: 400 (Invalid query parameter: "ns" - Namespaces are a Consul Enterprise feature)`,
	} {
		status = run(consulAddr, "status", flag)
		if status.Code != cli.ExitConsulNotRead || strings.TrimSpace(status.Stderr) != want || !strings.Contains(status.Stdout, s.GatewayName) {
			t.Errorf("status %s against Consul CE: exit %d, stderr %q; want %d and %q", flag, status.Code, status.Stderr, cli.ExitConsulNotRead, want)
		}
	}

	// collect as the controller, to stdout as in its pod: what the ClusterRole does not
	// grant (Events, pods/log, pods/proxy) is recorded, the rest is written.
	controllerNS := env.NewNamespace(t, "cli-controller")
	env.Create(t, testenv.UnscheduledPod(controllerNS, "replica", map[string]string{"app.kubernetes.io/name": "consul-gateway-controller"},
		"controller", corev1.ContainerPort{Name: "metrics", ContainerPort: 8080}))
	bundle := run(consulAddr, "collect", "--out", "-", "--controller-namespace="+controllerNS)
	if bundle.Code != 0 {
		t.Fatalf("collect as the controller: exit %d\n%s", bundle.Code, bundle.Stderr)
	}
	bundleFile := filepath.Join(t.TempDir(), "bundle.tar.gz")
	if err := os.WriteFile(bundleFile, []byte(bundle.Stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	files := testenv.ReadTarGz(t, bundleFile)
	for _, want := range []string{
		`list the Events of namespace ` + s.Namespace + `: events is forbidden`,
		`logs/` + controllerNS + `/replica/controller.log: pods "replica" is forbidden`,
		`metrics/` + controllerNS + `/replica.txt: pods "replica:8080" is forbidden`,
	} {
		if !strings.Contains(files["errors.txt"], want) {
			t.Errorf("collect as the controller: errors.txt does not say %q:\n%s", want, files["errors.txt"])
		}
	}
	if !strings.Contains(files["kubernetes/httproutes.yaml"], "name: web") || !strings.Contains(files["consul/entries.json"], entry) {
		t.Errorf("collect as the controller: the route or its entry is missing:\n%s\n%s", files["kubernetes/httproutes.yaml"], files["consul/entries.json"])
	}
	t.Logf("collect as the controller, errors.txt:\n%s", files["errors.txt"])

	// --problems: none while all is well; a route without its backend after.
	problems := run(consulAddr, "status", "--problems")
	if problems.Code != 0 || strings.Count(problems.Stdout, "\n") != 1 {
		t.Errorf("status --problems on a healthy namespace: exit %d, want 0 and the header alone\n%s%s", problems.Code, problems.Stdout, problems.Stderr)
	}
	broken := testenv.HTTPRoute(s.Namespace, "broken", []gatewayv1.ParentReference{{Name: gatewayv1.ObjectName(s.GatewayName)}}, testenv.Backend("no-such-service", testenv.BackendPort))
	env.Create(t, broken)
	testenv.Eventually(t, 30*time.Second, "the broken route is judged", func(ctx context.Context) error {
		r, err := env.GatewayClient.GatewayV1().HTTPRoutes(s.Namespace).Get(ctx, "broken", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, p := range r.Status.Parents {
			if p.ControllerName == s.Controller && meta.IsStatusConditionFalse(p.Conditions, "ResolvedRefs") {
				return nil
			}
		}
		return fmt.Errorf("parents %+v", r.Status.Parents)
	})
	problems = run(consulAddr, "status", "--problems")
	if problems.Code != cli.ExitProblems || !strings.Contains(problems.Stdout, "broken") || strings.Contains(problems.Stdout, "web ") {
		t.Errorf("status --problems: exit %d, want %d and the broken route alone\n%s%s", problems.Code, cli.ExitProblems, problems.Stdout, problems.Stderr)
	}
	t.Logf("status --problems (exit %d):\n%s", problems.Code, problems.Stdout)
}

// waitRouteConsulAccepted waits until the route's status says Consul accepted it.
func waitRouteConsulAccepted(t *testing.T, s consulStack, route string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "Consul accepted route "+route, func(ctx context.Context) error {
		r, err := env.GatewayClient.GatewayV1().HTTPRoutes(s.Namespace).Get(ctx, route, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, p := range r.Status.Parents {
			if p.ControllerName == s.Controller && meta.IsStatusConditionTrue(p.Conditions, gwsync.ConsulAcceptedCondition) {
				return nil
			}
		}
		return fmt.Errorf("route parents %+v", r.Status.Parents)
	})
}
