package dataplane

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// gatewayCase is one Gateway of its own class and namespace, its GatewayConfig, and
// the controller serving the class.
type gatewayCase struct {
	t          *testing.T
	ns         string
	class      string
	controller *testenv.Controller
	name       string // of the Gateway's Deployment, Service and ServiceAccount
}

func newGatewayCase(t *testing.T, prefix string, serviceType corev1.ServiceType) *gatewayCase {
	t.Helper()
	ns := env.NewNamespace(t, prefix)
	controllerName := gatewayv1.GatewayController("consul-gateway-controller.github.io/" + ns)
	g := &gatewayCase{t: t, ns: ns, class: ns}
	// Which of the Gateway's annotations its Service gets is the class's choice; the
	// Gateway's own GatewayConfig sets what a tenant may (gatewayconfig.For).
	env.Create(t, &v1alpha1.GatewayConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "class"},
		Spec:       v1alpha1.GatewayConfigSpec{Service: &v1alpha1.ServiceConfig{CopyAnnotations: []string{"lb.example.com/scheme"}}},
	})
	createClass(t, ns, controllerName, &gatewayv1.ParametersReference{
		Group: v1alpha1.GroupName, Kind: v1alpha1.GatewayConfigKind, Name: "class", Namespace: new(gatewayv1.Namespace(ns)),
	})
	g.controller = startController(t, ns, controllerName)
	cert, key := testenv.SelfSigned(t, "secure.example.com")
	env.Create(t, testenv.TLSSecret(ns, "tls", cert, key))
	env.Create(t, &v1alpha1.GatewayConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"},
		Spec: v1alpha1.GatewayConfigSpec{
			Replicas: &v1alpha1.Replicas{Default: new(int32(2))},
			Service:  &v1alpha1.ServiceConfig{Type: &serviceType},
		},
	})
	gw := testenv.Gateway(ns, "edge", ns, testenv.HTTPListener("http", 80), testenv.HTTPSListener("https", 443, gatewayv1.SecretObjectReference{Name: "tls"}))
	gw.Annotations = map[string]string{"lb.example.com/scheme": "internal"}
	gw.Spec.Infrastructure = &gatewayv1.GatewayInfrastructure{
		Labels:        map[gatewayv1.LabelKey]gatewayv1.LabelValue{"team": "edge"},
		ParametersRef: &gatewayv1.LocalParametersReference{Group: v1alpha1.GroupName, Kind: v1alpha1.GatewayConfigKind, Name: "edge"},
	}
	env.Create(t, gw)
	g.name = dataplane.Name(gw)
	return g
}

func (g *gatewayCase) gateway(ctx context.Context) (*gatewayv1.Gateway, error) {
	return env.GatewayClient.GatewayV1().Gateways(g.ns).Get(ctx, "edge", metav1.GetOptions{})
}

func (g *gatewayCase) deployment(ctx context.Context) (*appsv1.Deployment, error) {
	return env.KubeClient.AppsV1().Deployments(g.ns).Get(ctx, g.name, metav1.GetOptions{})
}

func (g *gatewayCase) service(ctx context.Context) (*corev1.Service, error) {
	return env.KubeClient.CoreV1().Services(g.ns).Get(ctx, g.name, metav1.GetOptions{})
}

// serviceAndDeployment reads the Gateway's Service and Deployment.
func (g *gatewayCase) serviceAndDeployment(ctx context.Context) (*corev1.Service, *appsv1.Deployment, error) {
	svc, err := g.service(ctx)
	if err != nil {
		return nil, nil, err
	}
	d, err := g.deployment(ctx)
	return svc, d, err
}

// programmed waits until the Gateway's Programmed condition starts with want.
func (g *gatewayCase) programmed(want string, timeout time.Duration) *gatewayv1.Gateway {
	g.t.Helper()
	return g.condition("Programmed", want, timeout)
}

// condition waits until the Gateway's condition of condType, as "Status/Reason:
// message", starts with want, and returns the Gateway then.
func (g *gatewayCase) condition(condType, want string, timeout time.Duration) *gatewayv1.Gateway {
	g.t.Helper()
	var last *gatewayv1.Gateway
	testenv.Eventually(g.t, timeout, "Gateway "+condType+" "+want, func(ctx context.Context) error {
		gw, err := g.gateway(ctx)
		if err != nil {
			return err
		}
		last = gw
		if got := testenv.ConditionText(gw.Status.Conditions, condType); !strings.HasPrefix(got, want) {
			return fmt.Errorf("%s %q, addresses %v", condType, got, gw.Status.Addresses)
		}
		return nil
	})
	return last
}

// restart stops the case's controller, starts another for its class, waits until it
// has settled having synced keys of every queue in worked (testenv.Settled), and returns
// the sum of counter's series in its metrics then.
func (g *gatewayCase) restart(t *testing.T, counter string, worked ...string) float64 {
	t.Helper()
	if _, err := g.controller.Terminate(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	g.controller = startController(t, g.ns+"-restarted", gatewayv1.GatewayController("consul-gateway-controller.github.io/"+g.ns))
	return testenv.MetricSum(testenv.Settled(t, g.controller, worked...), counter)
}

// updateGateway edits the Gateway as a user would, again on a conflict: the
// controller writes its status meanwhile.
func updateGateway(t *testing.T, g *gatewayCase, edit func(*gatewayv1.Gateway)) {
	t.Helper()
	gateways := env.GatewayClient.GatewayV1().Gateways(g.ns)
	testenv.Update(t, gateways.Get, gateways.Update, "edge", func(gw *gatewayv1.Gateway) {
		if gw.Annotations == nil {
			gw.Annotations = map[string]string{}
		}
		edit(gw)
	})
}

// updateConfig edits the GatewayConfig ns/edge.
func updateConfig(t *testing.T, ns string, edit func(*v1alpha1.GatewayConfig)) {
	t.Helper()
	configs := env.ConfigClient.GatewayConfigs(ns)
	testenv.Update(t, configs.Get, configs.Update, "edge", edit)
}

func servicePorts(svc *corev1.Service) []int32 {
	var ports []int32
	for _, p := range svc.Spec.Ports {
		ports = append(ports, p.Port)
	}
	slices.Sort(ports)
	return ports
}

func addressStrings(addresses []gatewayv1.GatewayStatusAddress) []string {
	var out []string
	for _, a := range addresses {
		out = append(out, string(*a.Type)+"="+a.Value)
	}
	return out
}
