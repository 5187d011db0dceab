package xds

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/xds/envoy"
)

// TestRouteAppliedAgain deletes a gateway's only route and applies it again: the
// gateway must serve it again. Consul 1.15.4 alone does not (TestUnboundChainIsForgotten);
// the controller refreshes the backend's discovery chain once the route is bound again.
func TestRouteAppliedAgain(t *testing.T) {
	setup(t)
	const ns = "xds-reapplied"
	if err := kubectlApply(filepath.Join("testdata", "reapplied.yaml")); err != nil {
		t.Fatal(err)
	}
	registerBackends(t, ns, 0)
	awaitProgrammed(t, ns, "edge")
	w := envoy.Watch(t.Context(), env.Consul.GRPCAddr(), gatewayProxy(t, ns, "edge"))
	t.Cleanup(w.Close)
	awaitServed(t, w, 80, "200")

	routes := env.GatewayClient.GatewayV1().HTTPRoutes(ns)
	route, err := routes.Get(t.Context(), "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := routes.Delete(t.Context(), "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	awaitServed(t, w, 80, "no listener")
	refreshed := chainRefreshOf(t, "reapplied-app")
	// Long enough for the gateway's proxy state to see the backend's chain fire while
	// no route names it.
	time.Sleep(2 * time.Second)

	route.ObjectMeta = metav1.ObjectMeta{Name: route.Name, Namespace: route.Namespace}
	route.Status = gatewayv1.HTTPRouteStatus{}
	if _, err := routes.Create(t.Context(), route, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	awaitServed(t, w, 80, "200")
	// Served again is not enough: the race above does not show in every run, and a
	// gateway that never forgot the chain serves it without the controller's help.
	// The refresh itself must have been written: the backend's service-defaults carry
	// a new refresh count.
	testenv.Eventually(t, 30*time.Second, "the backend's chain refreshed", func(context.Context) error {
		if now := chainRefreshOf(t, "reapplied-app"); now == "" || now == refreshed {
			return fmt.Errorf("service-defaults %s has %s %q, had %q with the route deleted", "reapplied-app", chainRefreshMeta, now, refreshed)
		}
		return nil
	})
}

// chainRefreshMeta is the service-defaults meta key whose value the controller
// changes to refresh a backend's discovery chain (consul/chains.go).
const chainRefreshMeta = "gateway-controller-chain-refresh"

// chainRefreshOf is the refresh count on service's service-defaults; "" when it has
// none, or there are none.
func chainRefreshOf(t *testing.T, service string) string {
	t.Helper()
	entry, err := env.ConsulEntry(consulapi.ServiceDefaults, service)
	if err != nil {
		t.Fatal(err)
	}
	if entry == nil {
		return ""
	}
	return entry.GetMeta()[chainRefreshMeta]
}
