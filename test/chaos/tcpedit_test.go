package chaos

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// moveTCPBackend points the TCPRoute at a new Service named after a new edit number,
// tcp-<n>, and deletes the numbered one it leaves. A tcp-route entry holds nothing a
// user writes but its parents and its service, so the service's name is where the
// edit number goes, as a path carries it for an http-route; the no-regression check
// then follows tcp-route entries too.
func (w *world) moveTCPBackend(ctx context.Context) error {
	routes := w.env.gw.GatewayV1().TCPRoutes(w.ns)
	route, err := routes.Get(ctx, tcpRoute, metav1.GetOptions{})
	if err != nil {
		return err
	}
	left := string(route.Spec.Rules[0].BackendRefs[0].Name)
	name := w.service(fmt.Sprintf("tcp-%d", w.next()))
	// The Service first: a route to a Service not there yet is left out of Consul.
	if err := w.createService(ctx, w.ns, name); err != nil {
		return err
	}
	if err := w.patchTCPBackend(ctx, name); err != nil {
		return err
	}
	err = w.env.kube.CoreV1().Services(w.ns).Delete(ctx, left, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (w *world) patchTCPBackend(ctx context.Context, service string) error {
	rules := []gatewayv1.TCPRouteRule{{BackendRefs: []gatewayv1.BackendRef{{BackendObjectReference: gatewayv1.BackendObjectReference{
		Name: gatewayv1.ObjectName(service), Port: ptr.To(gatewayv1.PortNumber(5432)),
	}}}}}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"rules": rules}})
	if err != nil {
		return err
	}
	_, err = w.env.gw.GatewayV1().TCPRoutes(w.ns).Patch(ctx, tcpRoute, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}
