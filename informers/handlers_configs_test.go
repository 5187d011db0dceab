package informers

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// A GatewayConfig event reaches the classes and Gateways that name it as parameters,
// and nothing else; a reference of another kind names no config.
func TestGatewayConfigEvents(t *testing.T) {
	configRef := func(kind gatewayv1.Kind, namespace, name string) *gatewayv1.ParametersReference {
		return &gatewayv1.ParametersReference{Group: v1alpha1.GroupName, Kind: kind, Name: name, Namespace: new(gatewayv1.Namespace(namespace))}
	}
	withParams := testenv.GatewayClass("with-params", worldController)
	withParams.Spec.ParametersRef = configRef(v1alpha1.GatewayConfigKind, "configs", "shared")
	wrongKind := testenv.GatewayClass("wrong-kind", worldController)
	wrongKind.Spec.ParametersRef = configRef("ConfigMap", "configs", "shared")
	paramsGateway := gateway("infra", "own", "consul", "")
	paramsGateway.Spec.Infrastructure = &gatewayv1.GatewayInfrastructure{ParametersRef: &gatewayv1.LocalParametersReference{
		Group: v1alpha1.GroupName, Kind: v1alpha1.GatewayConfigKind, Name: "own",
	}}
	config := func(namespace, name string) *v1alpha1.GatewayConfig {
		return &v1alpha1.GatewayConfig{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, ResourceVersion: "1"}}
	}
	runEventCases(t, []eventCase{
		{"the class's config", func(h eventHandlers) { h.gatewayConfigs.OnAdd(config("configs", "shared"), false) },
			enqueued{GatewayClasses: []string{"with-params"}}},
		{"a Gateway's own config", func(h eventHandlers) {
			c := config("infra", "own")
			h.gatewayConfigs.OnUpdate(c, resynced(c))
		}, enqueued{Gateways: []string{"infra/own"}}},
		{"a config nobody names", func(h eventHandlers) { h.gatewayConfigs.OnDelete(config("apps", "own")) }, enqueued{}},
	}, withParams, wrongKind, paramsGateway)
}
