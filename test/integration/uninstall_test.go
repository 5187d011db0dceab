package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// TestUninstallKeepsLiveGateways installs the chart, brings a Gateway of its managed
// class and an HTTPRoute to Consul, and runs helm uninstall while the controller still
// runs. helm deletes the GatewayClass and its GatewayConfig with everything else; the
// gateway-exists finalizer keeps the class, being deleted, while the Gateway uses it,
// and the controller holds the Gateway as it is: Consul keeps its entries, the
// Gateway keeps its Deployment, Service and PodDisruptionBudget, and its status. Then
// the cleanup path of docs/upgrade.md: the Gateway deleted, the controller removes its
// entries and the finalizer, and the class goes.
//
// The controller runs with the chart's arguments and the harness's credentials: the
// leader that still runs while helm deletes the chart's objects, which keeps its
// rights for the whole test. Run with the chart's own ServiceAccount, it would lose
// them in the same uninstall and could not show what it does with them.
func TestUninstallKeepsLiveGateways(t *testing.T) {
	suffix := utilrand.String(5)
	c := installChart(t, "uninstall-"+suffix)
	r := c.rendered
	const class = chartGatewayClass
	checkGatewayClassPolicy(t, class)
	// Another test's Gateway of the class would rightly keep it, and this test's end
	// would wait on it.
	others, err := env.GatewayClient.GatewayV1().Gateways("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, gw := range others.Items {
		if gw.Spec.GatewayClassName == class {
			t.Fatalf("Gateway %s/%s of class %s, left by another test, would keep the class", gw.Namespace, gw.Name, class)
		}
	}

	u := newUninstallCase(t, "uninstall-"+suffix, class)
	const pod = "consul-gateway-controller-uninstall-0"
	p := env.RunController(t, testenv.ControllerOptions{Name: pod, Args: r.processArgs(t, pod)})
	t.Cleanup(func() { _, _ = p.Terminate(10 * time.Second) })
	testenv.Eventually(t, 90*time.Second, "the Gateway and route in Consul, its workloads, the class's finalizer", func(ctx context.Context) error {
		return errors.Join(u.live(ctx), u.classFinalizer(ctx, true))
	})

	c.uninstall(t)
	testenv.Eventually(t, 30*time.Second, "the class being deleted, held by its finalizer, its GatewayConfig gone", func(ctx context.Context) error {
		c, err := env.GatewayClient.GatewayV1().GatewayClasses().Get(ctx, class, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			t.Fatalf("GatewayClass %s deleted while Gateway %s/edge uses it; the Gateway now: %v", class, u.ns, u.live(ctx))
		}
		if err != nil {
			return err
		}
		if c.DeletionTimestamp == nil {
			return errors.New("not being deleted")
		}
		_, err = env.ConfigClient.GatewayConfigs(deployNamespace).Get(ctx, class, metav1.GetOptions{})
		switch {
		case err == nil:
			return errors.New("the class's GatewayConfig is still there")
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("the class's GatewayConfig: %w", err)
		}
		if msg := testenv.ConditionText(c.Status.Conditions, "Accepted"); !strings.Contains(msg, "being deleted") {
			return fmt.Errorf("Accepted %q does not say the class is being deleted", msg)
		}
		return nil
	})
	testenv.Consistently(t, 15*time.Second, "the Gateway served as it was while its class is being deleted", func(ctx context.Context) error {
		return errors.Join(u.live(ctx), u.classFinalizer(ctx, true))
	})

	// The cleanup path: the Gateway first; then the class goes by itself.
	u.deleteGatewayAndRoute(t)
	testenv.Eventually(t, 60*time.Second, "the entries and the class gone", func(ctx context.Context) error {
		var problems []error
		for _, e := range u.entries {
			if _, _, err := env.ConsulClient.ConfigEntries().Get(e.kind, e.name, nil); err == nil {
				problems = append(problems, fmt.Errorf("Consul %s %s still there", e.kind, e.name))
			}
		}
		switch _, err := env.GatewayClient.GatewayV1().GatewayClasses().Get(ctx, class, metav1.GetOptions{}); {
		case err == nil:
			problems = append(problems, fmt.Errorf("GatewayClass %s still there", class))
		case !apierrors.IsNotFound(err):
			problems = append(problems, fmt.Errorf("GatewayClass %s: %w", class, err))
		}
		return errors.Join(problems...)
	})
	assertNoRefusal(t, p)
}

// uninstallCase is one Gateway with an HTTP listener and one HTTPRoute to a Service,
// in a namespace of its own that opted in to gateways.
type uninstallCase struct {
	ns, class string
	gateway   *gatewayv1.Gateway
	entries   []consulEntry
}

func newUninstallCase(t *testing.T, ns, class string) *uninstallCase {
	t.Helper()
	env.Create(t, testenv.Namespace(ns, gatewaysNamespaceLabels))
	env.Create(t, testenv.Service(ns, ns+"-web", 8080))
	env.Create(t, &v1alpha1.GatewayConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"},
		Spec:       v1alpha1.GatewayConfigSpec{Service: &v1alpha1.ServiceConfig{Type: new(corev1.ServiceTypeClusterIP)}},
	})
	gw := testenv.Gateway(ns, "edge", class, testenv.HTTPListener("http", 8080))
	gw.Spec.Infrastructure = &gatewayv1.GatewayInfrastructure{
		ParametersRef: &gatewayv1.LocalParametersReference{Group: v1alpha1.GroupName, Kind: v1alpha1.GatewayConfigKind, Name: "edge"},
	}
	env.Create(t, gw)
	env.Create(t, testenv.HTTPRoute(ns, "web", []gatewayv1.ParentReference{{Name: "edge"}}, testenv.Backend(ns+"-web", 8080)))
	var n translate.Naming
	u := &uninstallCase{ns: ns, class: class, gateway: gw, entries: []consulEntry{
		{consulapi.APIGateway, n.EntryName(ns, "edge")},
		{consulapi.HTTPRoute, n.EntryName(ns, "web")},
	}}
	// Whatever the test left: no controller collects it once the test is over.
	t.Cleanup(func() {
		u.deleteGatewayAndRoute(t)
		for _, e := range append(u.entries, consulEntry{consulapi.ServiceDefaults, ns + "-web"}) {
			_, _ = env.ConsulClient.ConfigEntries().Delete(e.kind, e.name, nil)
		}
	})
	return u
}

func (u *uninstallCase) deleteGatewayAndRoute(t *testing.T) {
	t.Helper()
	ctx, gw, del := context.Background(), env.GatewayClient.GatewayV1(), metav1.DeleteOptions{}
	if err := gw.HTTPRoutes(u.ns).Delete(ctx, "web", del); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete HTTPRoute: %v", err)
	}
	if err := gw.Gateways(u.ns).Delete(ctx, "edge", del); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete Gateway: %v", err)
	}
}

// live says what is missing of a served Gateway: its Consul entries, its accepted
// status, its Deployment, Service and PodDisruptionBudget.
func (u *uninstallCase) live(ctx context.Context) error {
	var problems []error
	for _, e := range u.entries {
		if _, _, err := env.ConsulClient.ConfigEntries().Get(e.kind, e.name, nil); err != nil {
			problems = append(problems, fmt.Errorf("Consul %s %s: %w", e.kind, e.name, err))
		}
	}
	gw, err := env.GatewayClient.GatewayV1().Gateways(u.ns).Get(ctx, "edge", metav1.GetOptions{})
	if err != nil {
		return errors.Join(append(problems, err)...)
	}
	if got := testenv.ConditionReason(gw.Status.Conditions, "Accepted"); got != "True/Accepted" {
		problems = append(problems, fmt.Errorf("Gateway Accepted %s", got))
	}
	name, get := dataplane.Name(gw), metav1.GetOptions{}
	for what, err := range map[string]error{
		"Deployment":          ignoreResult(env.KubeClient.AppsV1().Deployments(u.ns).Get(ctx, name, get)),
		"Service":             ignoreResult(env.KubeClient.CoreV1().Services(u.ns).Get(ctx, name, get)),
		"PodDisruptionBudget": ignoreResult(env.KubeClient.PolicyV1().PodDisruptionBudgets(u.ns).Get(ctx, name, get)),
	} {
		if err != nil {
			problems = append(problems, fmt.Errorf("%s %s/%s: %w", what, u.ns, name, err))
		}
	}
	return errors.Join(problems...)
}

// classFinalizer says whether the class carries the gateway-exists finalizer as want.
func (u *uninstallCase) classFinalizer(ctx context.Context, want bool) error {
	c, err := env.GatewayClient.GatewayV1().GatewayClasses().Get(ctx, u.class, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if got := slices.Contains(c.Finalizers, gatewayv1.GatewayClassFinalizerGatewaysExist); got != want {
		return fmt.Errorf("GatewayClass %s finalizers %v", u.class, c.Finalizers)
	}
	return nil
}

// checkGatewayClassPolicy acts on the installed class as the chart's ServiceAccount
// (dry runs): its ClusterRole's patch on gatewayclasses and the policy
// consul-gateway-controller-gatewayclasses admit adding and removing the
// gateway-exists finalizer and refuse any other change.
func checkGatewayClassPolicy(t *testing.T, class string) {
	t.Helper()
	_, token := serviceAccountKubeconfig(t, deployNamespace, deployName, nil)
	cfg := rest.CopyConfig(env.Kube.Config(testenv.AdminUser))
	cfg.BearerToken = token
	classes := gatewayclient.NewForConfigOrDie(cfg).GatewayV1().GatewayClasses()
	const rule = "rule gatewayclass-finalizer: "
	patch := func(ctx context.Context, edit func(*gatewayv1.GatewayClass) map[string]any) error {
		c, err := env.GatewayClient.GatewayV1().GatewayClasses().Get(ctx, class, metav1.GetOptions{})
		if err != nil {
			return err
		}
		data, err := json.Marshal(edit(c))
		if err != nil {
			return err
		}
		_, err = classes.Patch(ctx, class, types.MergePatchType, data, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	finalizers := func(list ...string) map[string]any {
		return map[string]any{"metadata": map[string]any{"finalizers": append([]string{}, list...)}}
	}
	refused := map[string]func(*gatewayv1.GatewayClass) map[string]any{
		"a label": func(*gatewayv1.GatewayClass) map[string]any {
			return map[string]any{"metadata": map[string]any{"labels": map[string]any{"team": "x"}}}
		},
		"the description": func(*gatewayv1.GatewayClass) map[string]any {
			return map[string]any{"spec": map[string]any{"description": "changed"}}
		},
		"another finalizer": func(c *gatewayv1.GatewayClass) map[string]any {
			return finalizers(append(slices.Clone(c.Finalizers), "example.com/keep")...)
		},
	}
	testenv.Eventually(t, 30*time.Second, "the GatewayClass policy in effect for the chart's ServiceAccount", func(ctx context.Context) error {
		for what, edit := range refused {
			switch err := patch(ctx, edit); {
			case err == nil:
				return fmt.Errorf("changing %s admitted, want refused by %q", what, rule)
			case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), rule):
				return fmt.Errorf("changing %s: %w, want refused by %q", what, err, rule)
			}
		}
		return nil
	})
	toggled := func(c *gatewayv1.GatewayClass) map[string]any {
		const ours = gatewayv1.GatewayClassFinalizerGatewaysExist
		if slices.Contains(c.Finalizers, ours) {
			return finalizers(slices.DeleteFunc(slices.Clone(c.Finalizers), func(f string) bool { return f == ours })...)
		}
		return finalizers(append(slices.Clone(c.Finalizers), ours)...)
	}
	if err := patch(t.Context(), toggled); err != nil {
		t.Errorf("adding or removing the finalizer as the chart's ServiceAccount: %v", err)
	}
}
