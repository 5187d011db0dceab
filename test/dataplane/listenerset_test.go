package dataplane

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// A ListenerSet's listener is served by its Gateway's pods, so the Gateway's Service
// and pods declare its port while the ListenerSet is attached, and drop it after.
func TestListenerSetPortsOnTheGatewayService(t *testing.T) {
	g := newGatewayCase(t, "lset", corev1.ServiceTypeClusterIP)
	g.programmed("True/Programmed", 60*time.Second)
	updateGateway(t, g, func(gw *gatewayv1.Gateway) {
		gw.Spec.AllowedListeners = &gatewayv1.AllowedListeners{Namespaces: &gatewayv1.ListenerNamespaces{From: new(gatewayv1.NamespacesFromSame)}}
	})
	sets := env.GatewayClient.GatewayV1().ListenerSets(g.ns)
	env.Create(t, testenv.ListenerSet(g.ns, "extra", gatewayv1.ParentGatewayReference{Name: "edge"},
		gatewayv1.ListenerEntry{Name: "alt", Port: 8081, Protocol: gatewayv1.HTTPProtocolType}))

	portsAre := func(want ...int32) {
		t.Helper()
		testenv.Eventually(t, 60*time.Second, fmt.Sprintf("the gateway Service and pod template declare ports %v", want), func(ctx context.Context) error {
			svc, dep, err := g.serviceAndDeployment(ctx)
			if err != nil {
				return err
			}
			var container []int32
			for _, p := range dep.Spec.Template.Spec.Containers[0].Ports {
				if p.Name != "ready" {
					container = append(container, p.ContainerPort)
				}
			}
			slices.Sort(container)
			if got := servicePorts(svc); !slices.Equal(got, want) || !slices.Equal(container, want) {
				return fmt.Errorf("Service ports %v, container ports %v", got, container)
			}
			return nil
		})
	}
	portsAre(80, 443, 8081)
	if err := sets.Delete(t.Context(), "extra", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	portsAre(80, 443)
}
