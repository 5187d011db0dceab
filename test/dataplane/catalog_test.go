package dataplane

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// Each gateway pod is an api-gateway instance in Consul's catalog, named like the
// Gateway's api-gateway entry, on the synthetic node "<node>-virtual", with a passing
// check while the pod is Ready. The catalog follows the pods, keeps other writers'
// instances, survives a Consul that lost its data, and a restarted controller writes
// nothing to it.
func TestGatewayPodsRegistered(t *testing.T) {
	g := newGatewayCase(t, "catalog", corev1.ServiceTypeClusterIP)
	g.programmed("True/Programmed", 60*time.Second)
	service := translate.Naming{}.EntryName(g.ns, "edge")

	instancesMatchPods := func(want int) {
		t.Helper()
		testenv.Eventually(t, 60*time.Second, fmt.Sprintf("%d registered instances match the Ready pods", want), func(ctx context.Context) error {
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
				e := byID[p.Name]
				if e == nil {
					return fmt.Errorf("pod %s has no passing instance", p.Name)
				}
				if e.Service.Kind != consulapi.ServiceKindAPIGateway || e.Service.Address != p.Status.PodIP || e.Node.Node != p.Spec.NodeName+"-virtual" || e.Node.Meta["synthetic-node"] != "true" {
					return fmt.Errorf("instance %s: kind %q, address %s, node %s %v", p.Name, e.Service.Kind, e.Service.Address, e.Node.Node, e.Node.Meta)
				}
			}
			return nil
		})
	}
	instancesMatchPods(2)

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
	instancesMatchPods(1)
	checkForeignKept(t, service, "the scale-down")

	// Consul loses its data (a dev agent restarted): everything is registered again.
	if err := env.Consul.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := env.Consul.Start(); err != nil {
		t.Fatal(err)
	}
	instancesMatchPods(1)

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

func keyOf(g *gatewayCase) cache.ObjectName { return cache.ObjectName{Namespace: g.ns, Name: "edge"} }
