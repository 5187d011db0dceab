package dataplane

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// Each gateway pod is an api-gateway instance in Consul's catalog, named like the
// Gateway's api-gateway entry, on the synthetic node "gateway-<node>", with a passing
// check while the pod is Ready. The catalog follows the pods, keeps other writers'
// instances, survives a Consul that lost its data, and a restarted controller writes
// nothing to it.
func TestGatewayPodsRegistered(t *testing.T) {
	g := newGatewayCase(t, "catalog", corev1.ServiceTypeClusterIP)
	g.programmed("True/Programmed", 60*time.Second)
	service := translate.Naming{}.EntryName(g.ns, "edge")

	g.instancesMatchPods(service, 2)

	// An instance an earlier version registered on "<node>-virtual", with the same ID
	// and meta as a current one, is deregistered.
	g.earlierNodeInstanceGoes(t, service)

	// Another writer's instance of the same service is never touched.
	foreign := &consulapi.CatalogRegistration{
		Node: "elsewhere", Address: "192.0.2.1", SkipNodeUpdate: true,
		Service: &consulapi.AgentService{Kind: consulapi.ServiceKindAPIGateway, ID: "foreign", Service: service, Address: "192.0.2.1"},
	}
	if _, err := env.ConsulClient.Catalog().Register(foreign, nil); err != nil {
		t.Fatal(err)
	}

	// One pod fewer: its instance goes, and the foreign one, of the same service, stays.
	updateConfig(t, g.ns, func(c *v1alpha1.GatewayConfig) { c.Spec.Replicas = &v1alpha1.Replicas{Default: new(int32(1))} })
	g.instancesMatchPods(service, 1)
	checkForeignKept(t, service, "the scale-down")

	// Consul loses its data (a dev agent restarted): everything is registered again.
	if err := env.Consul.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := env.Consul.Start(); err != nil {
		t.Fatal(err)
	}
	g.instancesMatchPods(service, 1)

	// A restarted controller against the converged catalog writes nothing to it. The
	// foreign instance, gone with Consul's data, is registered again first.
	if _, err := env.ConsulClient.Catalog().Register(foreign, nil); err != nil {
		t.Fatal(err)
	}
	if n := g.restart(t, "consul_gateway_controller_consul_catalog_writes_total", "catalog"); n != 0 {
		t.Errorf("the restarted controller made %v catalog writes, want 0", n)
	}
	checkForeignKept(t, service, "the restart")
}

// checkForeignKept fails t unless the instance "foreign" of service, another writer's,
// is still in the catalog after what happened.
func (g *gatewayCase) earlierNodeInstanceGoes(t *testing.T, service string) {
	t.Helper()
	entries, _, err := env.ConsulClient.Health().Service(service, "", true, nil)
	if err != nil || len(entries) == 0 {
		t.Fatalf("instances of %s: %v, %v", service, entries, err)
	}
	e := entries[0]
	old := e.Node.Node[len(dataplane.SyntheticNodePrefix):] + "-virtual"
	if _, err := env.ConsulClient.Catalog().Register(&consulapi.CatalogRegistration{
		Node: old, Address: e.Node.Address, SkipNodeUpdate: true, Service: e.Service,
	}, nil); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the instance on "+old+" is deregistered", func(ctx context.Context) error {
		services, _, err := env.ConsulClient.Catalog().Service(service, "", (&consulapi.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return err
		}
		for _, s := range services {
			if s.Node == old {
				return fmt.Errorf("%s still on %s", s.ServiceID, old)
			}
		}
		return nil
	})
	g.instancesMatchPods(service, len(entries))
}

func checkForeignKept(t *testing.T, service, after string) {
	t.Helper()
	services, _, err := env.ConsulClient.Catalog().Service(service, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(services, func(s *consulapi.CatalogService) bool { return s.ServiceID == "foreign" }) {
		t.Errorf("the foreign instance of %s was removed after %s", service, after)
	}
}

// instancesMatchPods waits until service has exactly one passing instance of ours per
// running pod of the Gateway, want of each, each an api-gateway instance at its pod's
// IP on its node's synthetic node.
func (g *gatewayCase) instancesMatchPods(service string, want int) {
	g.t.Helper()
	testenv.Eventually(g.t, 60*time.Second, fmt.Sprintf("%d registered instances match the Ready pods", want), func(ctx context.Context) error {
		pods, err := env.KubeClient.CoreV1().Pods(g.ns).List(ctx, metav1.ListOptions{LabelSelector: dataplane.PodSelector(keyOf(g)).String()})
		if err != nil {
			return err
		}
		entries, _, err := env.ConsulClient.Health().Service(service, "", true, (&consulapi.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return err
		}
		byID := map[string]*consulapi.ServiceEntry{}
		for _, e := range entries {
			if e.Service.Meta["gateway-controller"] != "" {
				byID[e.Service.ID] = e
			}
		}
		var running []corev1.Pod
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				running = append(running, p)
			}
		}
		if len(running) != want || len(byID) != want {
			return fmt.Errorf("%d pods, %d passing instances of ours", len(running), len(byID))
		}
		for _, p := range running {
			e := byID[dataplane.ProxyServiceID(&p)]
			if e == nil {
				return fmt.Errorf("pod %s has no passing instance", p.Name)
			}
			if e.Service.Kind != consulapi.ServiceKindAPIGateway || e.Service.Address != p.Status.PodIP || e.Node.Node != dataplane.SyntheticNode("", p.Spec.NodeName) || e.Node.Meta["synthetic-node"] != "true" {
				return fmt.Errorf("instance %s: kind %q, address %s, node %s %v", p.Name, e.Service.Kind, e.Service.Address, e.Node.Node, e.Node.Meta)
			}
		}
		return nil
	})
}

func keyOf(g *gatewayCase) cache.ObjectName { return cache.ObjectName{Namespace: g.ns, Name: "edge"} }

// A gateway pod that runs but is not Ready (its readiness probe fails) stays in the
// catalog with a critical check, so Consul sends it no traffic, while its Ready
// sibling stays passing. kwok turns the one pod the test labels not Ready for good.
func TestNotReadyGatewayPodIsCritical(t *testing.T) {
	ctx := t.Context()
	g := newGatewayCase(t, "notready", corev1.ServiceTypeClusterIP)
	g.programmed("True/Programmed", 60*time.Second)
	service := translate.Naming{}.EntryName(g.ns, "edge")
	g.instancesMatchPods(service, 2)

	pods, err := env.KubeClient.CoreV1().Pods(g.ns).List(ctx, metav1.ListOptions{LabelSelector: dataplane.PodSelector(keyOf(g)).String()})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Fatalf("%d gateway pods, want 2", len(pods.Items))
	}
	failing, ready := pods.Items[0].Name, pods.Items[1].Name
	label := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, testenv.NotReadyLabel))
	if _, err := env.KubeClient.CoreV1().Pods(g.ns).Patch(ctx, failing, types.MergePatchType, label, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	g.waitPodReady(failing, corev1.ConditionFalse)

	want := map[string]string{
		dataplane.ProxyServiceID(&pods.Items[0]): consulapi.HealthCritical,
		dataplane.ProxyServiceID(&pods.Items[1]): consulapi.HealthPassing,
	}
	testenv.Eventually(t, 60*time.Second, fmt.Sprintf("the not-Ready pod %s's instance critical, the Ready pod %s's passing", failing, ready), func(ctx context.Context) error {
		got, err := readinessChecks(ctx, service)
		if err != nil {
			return err
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("readiness checks %v", got)
		}
		return nil
	})
	// The critical check stands for a pod that is still not Ready, not for one kwok
	// readied again meanwhile.
	if status, err := g.podReady(ctx, failing); err != nil || status != corev1.ConditionFalse {
		t.Errorf("pod %s Ready=%s (%v) once its instance was critical, want False", failing, status, err)
	}
}

// waitPodReady waits until the pod's Ready condition has status.
func (g *gatewayCase) waitPodReady(name string, status corev1.ConditionStatus) {
	g.t.Helper()
	testenv.Eventually(g.t, 30*time.Second, fmt.Sprintf("pod %s Ready=%s", name, status), func(ctx context.Context) error {
		got, err := g.podReady(ctx, name)
		if err != nil {
			return err
		}
		if got != status {
			return fmt.Errorf("Ready=%q", got)
		}
		return nil
	})
}

// podReady is the status of the pod's Ready condition, "" when it has none.
func (g *gatewayCase) podReady(ctx context.Context, name string) (corev1.ConditionStatus, error) {
	pod, err := env.KubeClient.CoreV1().Pods(g.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status, nil
		}
	}
	return "", nil
}

// readinessChecks is the status of the readiness check of each instance of ours of
// service, by instance ID, whatever their health.
func readinessChecks(ctx context.Context, service string) (map[string]string, error) {
	entries, _, err := env.ConsulClient.Health().Service(service, "", false, (&consulapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, e := range entries {
		if e.Service.Meta["gateway-controller"] == "" {
			continue
		}
		for _, c := range e.Checks {
			if c.ServiceID == e.Service.ID && c.Name == "Kubernetes Readiness Check" {
				out[e.Service.ID] = c.Status
			}
		}
	}
	return out, nil
}
