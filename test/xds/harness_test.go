package xds

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	gosync "sync"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/backends"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/xds/envoy"
)

// The controller of these tests runs once for the package, with the repository's
// examples applied: the scenarios use the examples' GatewayClass.
var (
	setupOnce  gosync.Once
	setupError error
	controller *testenv.Controller
)

func setup(t *testing.T) {
	t.Helper()
	setupOnce.Do(func() { setupError = startControllerWithExamples(t) })
	if setupError != nil {
		t.Fatal(setupError)
	}
}

func startControllerWithExamples(t *testing.T) error {
	var err error
	// Not RunController: the controller serves every test of the package, not only the
	// first one's, and goes when the test binary does.
	controller, err = env.StartController(testenv.ControllerOptions{
		Binary: testenv.ControllerBinary(t),
		Name:   "xds",
		Args:   []string{"--leader-elect=false", "--manage-service-defaults", "-v=4"},
	})
	if err != nil {
		return err
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	return kubectlApply(filepath.Join(root, "examples"))
}

func kubectlApply(path string) error {
	kubectl, err := testenv.Kubectl()
	if err != nil {
		return err
	}
	// A file per call: scenarios apply in parallel, and one writing the file while
	// another's kubectl reads it made that kubectl fall back to localhost:8080.
	dir, err := os.MkdirTemp(env.Dir(), "kubectl-")
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := env.Kube.WriteKubeconfig(kubeconfig, testenv.AdminUser); err != nil {
		return err
	}
	out, err := exec.Command(kubectl, "--kubeconfig="+kubeconfig, "apply", "-f", path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl apply -f %s: %w\n%s", path, err, out)
	}
	return nil
}

// backendAddress is the address of the one mesh instance registered for the i-th
// backend Service of a namespace (in name order), so that the gateway's clusters have
// endpoints: in 10.2.0.0/24 for the scenario's own namespace (subnet 0), in
// 10.2.<10+k>.0/24 for its k-th other one, so that instances of one name in two
// namespaces differ.
func backendAddress(subnet, i int) string { return fmt.Sprintf("10.2.%d.%d", subnet, i+1) }

// outsideAddress is the address of the i-th Consul service of a scenario registered
// outside Kubernetes.
func outsideAddress(i int) string { return fmt.Sprintf("10.3.0.%d", i+1) }

// registerBackends plays consul-k8s's endpoints controller: for each Service of the
// namespace, it registers the instance and sidecar proxy of a mesh pod under each
// Consul service the Service's injected pods register as (their connect-service
// annotation), or under the Service's name when it has none, on one node, at
// addresses of subnet (backendAddress). It returns the address of each Consul service.
func registerBackends(t *testing.T, ns string, subnet int) map[string]string {
	t.Helper()
	services, err := env.KubeClient.CoreV1().Services(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	podList, err := env.KubeClient.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods := make([]*corev1.Pod, len(podList.Items))
	for i := range podList.Items {
		pods[i] = &podList.Items[i]
	}
	// The gateway's own Service may or may not exist yet; counting only backends keeps
	// each backend's address the same from run to run, as the golden files need.
	addresses := map[string]string{}
	for _, svc := range services.Items {
		if svc.Labels[dataplane.ManagedByLabel] != "" {
			continue
		}
		names := backends.ConsulNames(&svc, pods)
		if len(names) == 0 {
			// No registered pod: the Service's name, as if registered by other
			// means, so that every backend has an instance.
			names = []string{svc.Name}
		}
		for _, name := range names {
			addr := backendAddress(subnet, len(addresses))
			addresses[name] = addr
			registerMeshInstance(t, ns, name, addr)
		}
	}
	return addresses
}

// declareHTTP writes the service-defaults that say a Consul service speaks http, as the
// owner of a service outside Kubernetes does: Consul 1.15 refuses an http-route to a
// service of another protocol, and the controller writes none for a MeshService's.
func declareHTTP(t *testing.T, name string) {
	t.Helper()
	entry := &consulapi.ServiceConfigEntry{Kind: consulapi.ServiceDefaults, Name: name, Protocol: "http"}
	if _, _, err := env.ConsulClient.ConfigEntries().Set(entry, nil); err != nil {
		t.Fatal(err)
	}
}

// registerMeshInstance registers a Consul service's instance at addr, and its sidecar
// proxy, as consul-k8s registers a mesh pod of namespace ns: both carry the namespace
// in their meta.
func registerMeshInstance(t *testing.T, ns, name, addr string) {
	t.Helper()
	registerInstance(t, "backends-"+ns, name, addr, map[string]string{translate.KubeNamespaceMeta: ns})
}

// registerOutsideInstance registers a Consul service's instance at addr, and its
// sidecar proxy, as a VM's agent would: on a node of its own, without the Kubernetes
// namespace meta.
func registerOutsideInstance(t *testing.T, name, addr string) {
	t.Helper()
	registerInstance(t, "outside-kubernetes", name, addr, nil)
}

func registerInstance(t *testing.T, node, name, addr string, meta map[string]string) {
	t.Helper()
	reg := &consulapi.CatalogRegistration{
		Node: node, Address: "10.2.0.254",
		Service: &consulapi.AgentService{
			Kind: consulapi.ServiceKindConnectProxy, ID: name + "-sidecar-proxy", Service: name + "-sidecar-proxy",
			Address: addr, Port: 20000, Meta: meta,
			Proxy: &consulapi.AgentServiceConnectProxyConfig{DestinationServiceName: name, LocalServicePort: 8080},
		},
	}
	if _, err := env.ConsulClient.Catalog().Register(reg, nil); err != nil {
		t.Fatal(err)
	}
	reg.Service = &consulapi.AgentService{ID: name, Service: name, Address: addr, Port: 8080, Meta: meta}
	if _, err := env.ConsulClient.Catalog().Register(reg, nil); err != nil {
		t.Fatal(err)
	}
}

// awaitProgrammed waits until the Gateway is Programmed and every HTTPRoute and
// TCPRoute of its namespace is accepted by Consul on each parent, but for the refused
// HTTPRoutes, which must be refused (Accepted=False) instead.
func awaitProgrammed(t *testing.T, ns, gateway string, refused ...string) {
	t.Helper()
	testenv.Eventually(t, 90*time.Second, "Gateway "+ns+"/"+gateway+" and its routes programmed", func(ctx context.Context) error {
		gw, err := env.GatewayClient.GatewayV1().Gateways(ns).Get(ctx, gateway, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := testenv.ConditionTrue(gw.Status.Conditions, "Programmed"); err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
		var parents []gatewayv1.RouteParentStatus
		var unstated []string
		stated := func(kind, name string, of []gatewayv1.RouteParentStatus) {
			if len(of) == 0 {
				unstated = append(unstated, kind+" "+name)
			}
			parents = append(parents, of...)
		}
		http, err := env.GatewayClient.GatewayV1().HTTPRoutes(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, r := range http.Items {
			if slices.Contains(refused, r.Name) {
				if err := refusedEverywhere(r); err != nil {
					return err
				}
				continue
			}
			stated("httproute", r.Name, r.Status.Parents)
		}
		tcp, err := env.GatewayClient.GatewayV1().TCPRoutes(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, r := range tcp.Items {
			stated("tcproute", r.Name, r.Status.Parents)
		}
		if len(unstated) > 0 {
			return fmt.Errorf("no status: %v", unstated)
		}
		for _, p := range parents {
			if err := testenv.ConditionTrue(p.Conditions, gwsync.ConsulAcceptedCondition); err != nil {
				return fmt.Errorf("route parent %s: %w", p.ParentRef.Name, err)
			}
		}
		return nil
	})
}

// refusedEverywhere: the route has a status on some parent, Accepted=False on each.
func refusedEverywhere(r gatewayv1.HTTPRoute) error {
	if len(r.Status.Parents) == 0 {
		return fmt.Errorf("httproute %s: no status", r.Name)
	}
	for _, p := range r.Status.Parents {
		if !strings.HasPrefix(testenv.ConditionReason(p.Conditions, "Accepted"), "False/") {
			return fmt.Errorf("httproute %s: Accepted is %s, want False", r.Name, testenv.ConditionText(p.Conditions, "Accepted"))
		}
	}
	return nil
}

// gatewayProxy waits until a pod of the Gateway is registered and passing in Consul's
// catalog, and returns it as the proxy to fetch xDS for.
func gatewayProxy(t *testing.T, ns, gateway string) envoy.Proxy {
	t.Helper()
	return passingGatewayInstance(t, env.ConsulClient, translate.Naming{}.EntryName(ns, gateway), func(node string) bool {
		return strings.HasPrefix(node, dataplane.SyntheticNodePrefix)
	})
}

// passingGatewayInstance waits until service has a passing api-gateway instance on a
// node onNode accepts, as client reads the catalog, and returns it as the proxy to
// fetch xDS for.
func passingGatewayInstance(t *testing.T, client *consulapi.Client, service string, onNode func(string) bool) envoy.Proxy {
	t.Helper()
	var proxy envoy.Proxy
	testenv.Eventually(t, 60*time.Second, "a passing catalog instance of "+service, func(ctx context.Context) error {
		entries, _, err := client.Health().Service(service, "", true, (&consulapi.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.Service.Kind == consulapi.ServiceKindAPIGateway && onNode(e.Node.Node) {
				proxy = envoy.Proxy{ID: e.Service.ID, Node: e.Node.Node}
				return nil
			}
		}
		return fmt.Errorf("%d passing instances, none a gateway pod's", len(entries))
	})
	return proxy
}

// anyNode accepts an instance on any node.
func anyNode(string) bool { return true }

// podIPs are the addresses of a namespace's pods, which Consul may put into listener
// addresses; golden files scrub them.
func podIPs(t *testing.T, ns string) []string {
	t.Helper()
	pods, err := env.KubeClient.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && p.Status.Phase == corev1.PodRunning {
			ips = append(ips, p.Status.PodIP)
		}
	}
	return ips
}
