package dataplane

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// A tenant's own GatewayConfig cannot choose what the gateway pods run or where they
// connect, nor more replicas than the class allows; and prefixed spec.infrastructure
// keys the operator did not allow stay off the deployed objects, named in the
// Gateway's Accepted message.
func TestTenantGatewayConfigLimits(t *testing.T) {
	ctx := t.Context()
	ns := env.NewNamespace(t, "tenantcfg")
	controllerName := gatewayv1.GatewayController("consul-gateway-controller.github.io/" + ns)
	configs := env.ConfigClient.GatewayConfigs(ns)
	env.Create(t, &v1alpha1.GatewayConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "class"},
		Spec:       v1alpha1.GatewayConfigSpec{Replicas: &v1alpha1.Replicas{Max: new(int32(3))}},
	})
	createClass(t, ns, controllerName, &gatewayv1.ParametersReference{
		Group: v1alpha1.GroupName, Kind: v1alpha1.GatewayConfigKind, Name: "class", Namespace: new(gatewayv1.Namespace(ns)),
	})
	startController(t, ns, controllerName)
	env.Create(t, &v1alpha1.GatewayConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"},
		Spec: v1alpha1.GatewayConfigSpec{
			Image:  "registry.invalid/not-consul-dataplane:1",
			Consul: &v1alpha1.ConsulConnection{Address: "consul.attacker.invalid"},
		},
	})
	gw := testenv.Gateway(ns, "edge", ns, testenv.HTTPListener("http", 80))
	gw.Spec.Infrastructure = &gatewayv1.GatewayInfrastructure{
		Labels:        map[gatewayv1.LabelKey]gatewayv1.LabelValue{"team": "edge"},
		Annotations:   map[gatewayv1.AnnotationKey]gatewayv1.AnnotationValue{"iam.gke.io/gcp-service-account": "admin@project.iam.gserviceaccount.com"},
		ParametersRef: &gatewayv1.LocalParametersReference{Group: v1alpha1.GroupName, Kind: v1alpha1.GatewayConfigKind, Name: "tenant"},
	}
	env.Create(t, gw)
	g := &gatewayCase{t: t, ns: ns, class: ns, name: dataplane.Name(gw)}

	g.condition("Accepted", "False/InvalidParameters: spec.infrastructure.parametersRef: GatewayConfig "+ns+"/tenant sets spec.image and spec.consul, which only its GatewayClass's GatewayConfig may set", 30*time.Second)
	if _, err := g.deployment(ctx); err == nil {
		t.Error("a Deployment was made from a GatewayConfig that sets the image")
	}

	testenv.Update(t, configs.Get, configs.Update, "tenant", func(c *v1alpha1.GatewayConfig) {
		c.Spec = v1alpha1.GatewayConfigSpec{Replicas: &v1alpha1.Replicas{Default: new(int32(5))}}
	})
	g.condition("Accepted", "False/InvalidParameters: spec.infrastructure.parametersRef: GatewayConfig "+ns+"/tenant asks for spec.replicas.default 5; its class allows 0 to 3", 30*time.Second)

	testenv.Update(t, configs.Get, configs.Update, "tenant", func(c *v1alpha1.GatewayConfig) {
		c.Spec.Replicas.Default = new(int32(2))
	})
	g.condition("Accepted", "True/Accepted: Gateway is valid; spec.infrastructure keys iam.gke.io/gcp-service-account are not propagated", 30*time.Second)
	testenv.Eventually(t, 60*time.Second, "the tenant's replicas, without the refused annotation", func(ctx context.Context) error {
		d, err := g.deployment(ctx)
		if err != nil {
			return err
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 || d.Spec.Template.Spec.Containers[0].Image != v1alpha1.DefaultImage {
			return fmt.Errorf("replicas %v, image %s", d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Image)
		}
		sa, err := env.KubeClient.CoreV1().ServiceAccounts(ns).Get(ctx, g.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, annotations := range []map[string]string{sa.Annotations, d.Annotations, d.Spec.Template.Annotations} {
			for k := range annotations {
				if strings.HasPrefix(k, "iam.gke.io/") {
					return fmt.Errorf("refused annotation %s deployed", k)
				}
			}
		}
		if sa.Labels["team"] != "edge" {
			return fmt.Errorf("ServiceAccount labels %v: want team=edge", sa.Labels)
		}
		return nil
	})
}
