package dataplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	gosync "sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// The default image before and after the upgrade TestImageRolloutIsBounded makes.
const (
	oldImage = "example.com/consul-dataplane:1.1.12"
	newImage = "example.com/consul-dataplane:1.1.13"
)

// TestImageRolloutIsBounded runs three Gateways on oldImage, then restarts the
// controller with --gateway-image=newImage and --gateway-image-rollout-limit=1. The
// Gateways' pods crash-loop (testenv.ContainerStateLabel) until their own
// spec.infrastructure.labels drop the label, so a Deployment rolled to newImage stays
// mid-roll until the test lets it finish. A watcher reads the Deployments all along:
// never more than one carries newImage without being rolled out. One Gateway takes
// newImage; the others wait for it. A waiting Gateway's own edit (its labels) is
// applied at once, on oldImage. Letting each roll finish lets the next one go, until
// all three run newImage.
func TestImageRolloutIsBounded(t *testing.T) {
	ns := env.NewNamespace(t, "imageroll")
	controllerName := gatewayv1.GatewayController("consul-gateway-controller.github.io/" + ns)
	createClass(t, ns, controllerName, nil)
	args := []string{"--gateway-infrastructure-keys=" + testenv.ContainerStateLabel, "--gateway-image-rollout-limit=1"}
	before := startController(t, ns, controllerName, append(args, "--gateway-image="+oldImage)...)
	names := []string{"a", "b", "c"}
	for _, name := range names {
		gw := testenv.Gateway(ns, name, ns, testenv.HTTPListener("http", 8080))
		gw.Spec.Infrastructure = &gatewayv1.GatewayInfrastructure{Labels: map[gatewayv1.LabelKey]gatewayv1.LabelValue{
			testenv.ContainerStateLabel: testenv.ContainerStateCrashLoopBackOff,
		}}
		env.Create(t, gw)
	}
	waitImages(t, ns, "every Gateway on the old image", func(images map[string]string) error {
		for _, name := range names {
			if images[name] != oldImage {
				return fmt.Errorf("images %v", images)
			}
		}
		return nil
	})
	if _, err := before.Terminate(10 * time.Second); err != nil {
		t.Fatal(err)
	}

	watch := watchRollingDeployments(t, ns)
	startController(t, ns+"-upgraded", controllerName, append(args, "--gateway-image="+newImage)...)
	first := waitNewImage(t, ns, 1)
	testenv.Consistently(t, 5*time.Second, "the other Gateways wait for "+first, func(ctx context.Context) error {
		if got := onNewImage(t, ns); len(got) != 1 {
			return fmt.Errorf("on the new image: %v", got)
		}
		return nil
	})
	// A waiting Gateway's own change is not held: it is applied on the image it runs.
	waiting := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == first })[0]
	healGateway(t, ns, waiting)
	waitDeployment(t, ns, waiting, "its own edit applied on the old image", func(d *appsv1.Deployment) error {
		if _, crashing := d.Spec.Template.Labels[testenv.ContainerStateLabel]; crashing || deploymentImage(d) != oldImage {
			return fmt.Errorf("labels %v, image %s", d.Spec.Template.Labels, deploymentImage(d))
		}
		return nil
	})
	// A hand edit of a waiting Gateway's image is put back to the image it runs at
	// once: drift, not a roll that waits for a place, nor a step to the new image.
	editImage(t, ns, waiting, "example.com/hand-edited:1")
	waitDeployment(t, ns, waiting, "the hand-edited image put back to the old one", func(d *appsv1.Deployment) error {
		if image := deploymentImage(d); image != oldImage {
			return fmt.Errorf("image %s", image)
		}
		return nil
	})

	healGateway(t, ns, first)
	second := waitNewImage(t, ns, 2)
	for _, name := range names {
		healGateway(t, ns, name)
	}
	waitImages(t, ns, "every Gateway rolled out on the new image", func(images map[string]string) error {
		for _, name := range names {
			if images[name] != newImage+" (rolled out)" {
				return fmt.Errorf("images %v", images)
			}
		}
		return nil
	})
	most, seen := watch()
	t.Logf("first %s, then %s; Deployments mid-roll to the new image at once: at most %d (%d reads)", first, second, most, seen)
	if most > 1 {
		t.Errorf("%d Deployments were rolling to the new image at once, want at most 1", most)
	}
	if seen == 0 {
		t.Error("the watcher read no Deployment")
	}
}

// TestGatewayPodDisruptionBudget: a Gateway of two replicas gets a PodDisruptionBudget
// that lets an eviction take one pod and refuses the second while the first is not
// replaced, and a Deployment that rolls with a surge and no unavailable pod.
func TestGatewayPodDisruptionBudget(t *testing.T) {
	ctx := t.Context()
	ns := env.NewNamespace(t, "pdb")
	controllerName := gatewayv1.GatewayController("consul-gateway-controller.github.io/" + ns)
	env.Create(t, &v1alpha1.GatewayConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "two"},
		Spec:       v1alpha1.GatewayConfigSpec{Replicas: &v1alpha1.Replicas{Default: new(int32(2))}},
	})
	createClass(t, ns, controllerName, &gatewayv1.ParametersReference{
		Group: v1alpha1.GroupName, Kind: v1alpha1.GatewayConfigKind, Name: "two", Namespace: new(gatewayv1.Namespace(ns)),
	})
	startController(t, ns, controllerName)
	gw := testenv.Gateway(ns, "edge", ns, testenv.HTTPListener("http", 8080))
	env.Create(t, gw)
	name := dataplane.Name(gw)
	var budget *policyv1.PodDisruptionBudget
	testenv.Eventually(t, 60*time.Second, "the budget allows one disruption of two healthy pods", func(ctx context.Context) error {
		var err error
		budget, err = env.KubeClient.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s := budget.Status; s.CurrentHealthy != 2 || s.DisruptionsAllowed != 1 {
			return fmt.Errorf("healthy %d, disruptions allowed %d", s.CurrentHealthy, s.DisruptionsAllowed)
		}
		return nil
	})
	if !metav1.IsControlledBy(budget, gw) || budget.Spec.MaxUnavailable == nil || *budget.Spec.MaxUnavailable != intstr.FromInt32(1) {
		t.Errorf("budget owners %v, maxUnavailable %v: want the Gateway's, 1", budget.OwnerReferences, budget.Spec.MaxUnavailable)
	}
	d, err := env.KubeClient.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := d.Spec.Strategy.RollingUpdate; r == nil || *r.MaxUnavailable != intstr.FromInt32(0) || *r.MaxSurge != intstr.FromInt32(1) {
		t.Errorf("rolling update %+v, want maxUnavailable 0, maxSurge 1", r)
	}

	pods, err := env.KubeClient.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: dataplane.PodSelector(cache.MetaObjectToName(gw)).String()})
	if err != nil || len(pods.Items) != 2 {
		t.Fatalf("gateway pods %v, %v: want 2", pods, err)
	}
	evict := func(pod string) error {
		return env.KubeClient.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod}})
	}
	if err := evict(pods.Items[0].Name); err != nil {
		t.Fatalf("evict the first pod: %v", err)
	}
	if err := evict(pods.Items[1].Name); !apierrors.IsTooManyRequests(err) {
		t.Errorf("evict the second pod at once: %v, want 429 Too Many Requests (the budget)", err)
	}
}

// healGateway takes the crash-loop label off a Gateway's spec.infrastructure.labels.
func healGateway(t *testing.T, ns, name string) {
	t.Helper()
	gateways := env.GatewayClient.GatewayV1().Gateways(ns)
	testenv.Update(t, gateways.Get, gateways.Update, name, func(gw *gatewayv1.Gateway) {
		gw.Spec.Infrastructure = nil
	})
}

// editImage sets the image of a Gateway's Deployment as kubectl edit would, retrying
// on a conflict with the Deployment controller's status writes.
func editImage(t *testing.T, ns, gateway, image string) {
	t.Helper()
	deployments := env.KubeClient.AppsV1().Deployments(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		all, err := gatewayDeployments(t.Context(), ns)
		if err != nil {
			return err
		}
		d := all[gateway]
		if d == nil {
			return fmt.Errorf("no Deployment of Gateway %s", gateway)
		}
		d.Spec.Template.Spec.Containers[0].Image = image
		_, err = deployments.Update(t.Context(), d, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
		return err
	})
	if err != nil {
		t.Fatalf("edit the image of %s/%s: %v", ns, gateway, err)
	}
}

// gatewayDeployments lists the namespace's gateway Deployments by Gateway.
func gatewayDeployments(ctx context.Context, ns string) (map[string]*appsv1.Deployment, error) {
	list, err := env.KubeClient.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: dataplane.ManagedSelector})
	if err != nil {
		return nil, err
	}
	out := map[string]*appsv1.Deployment{}
	for i := range list.Items {
		d := &list.Items[i]
		out[d.Labels[dataplane.GatewayNameLabel]] = d
	}
	return out, nil
}

// waitImages waits until check accepts the image of each Gateway's Deployment, with
// " (rolled out)" once it is.
func waitImages(t *testing.T, ns, what string, check func(map[string]string) error) {
	t.Helper()
	testenv.Eventually(t, 90*time.Second, what, func(ctx context.Context) error {
		deployments, err := gatewayDeployments(ctx, ns)
		if err != nil {
			return err
		}
		images := map[string]string{}
		for gw, d := range deployments {
			images[gw] = deploymentImage(d)
			if rolledOut(d) {
				images[gw] += " (rolled out)"
			}
		}
		return check(images)
	})
}

// waitNewImage waits until n Deployments carry newImage and returns the Gateway whose
// Deployment took it last.
func waitNewImage(t *testing.T, ns string, n int) string {
	t.Helper()
	var last string
	seen := onNewImage(t, ns)
	testenv.Eventually(t, 60*time.Second, fmt.Sprintf("%d Deployments on the new image", n), func(context.Context) error {
		now := onNewImage(t, ns)
		if len(now) > n {
			t.Fatalf("on the new image: %v, want %d at most", now, n)
		}
		if len(now) != n {
			return fmt.Errorf("on the new image: %v", now)
		}
		for _, gw := range now {
			if !slices.Contains(seen, gw) {
				last = gw
			}
		}
		return nil
	})
	return last
}

// onNewImage lists the Gateways whose Deployment carries newImage.
func onNewImage(t *testing.T, ns string) []string {
	t.Helper()
	deployments, err := gatewayDeployments(t.Context(), ns)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for gw, d := range deployments {
		if deploymentImage(d) == newImage {
			out = append(out, gw)
		}
	}
	slices.Sort(out)
	return out
}

func waitDeployment(t *testing.T, ns, gateway, what string, check func(*appsv1.Deployment) error) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, "Gateway "+gateway+": "+what, func(ctx context.Context) error {
		deployments, err := gatewayDeployments(ctx, ns)
		if err != nil {
			return err
		}
		d, ok := deployments[gateway]
		if !ok {
			return errors.New("no Deployment")
		}
		return check(d)
	})
}

// watchRollingDeployments reads the namespace's gateway Deployments every 50 ms until
// the returned function is called, which returns the most that were on newImage and
// not rolled out at once, and how many reads there were.
func watchRollingDeployments(t *testing.T, ns string) func() (most, reads int) {
	ctx, cancel := context.WithCancel(t.Context())
	var most, reads int
	var wg gosync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if deployments, err := gatewayDeployments(ctx, ns); err == nil {
				rolling := 0
				for _, d := range deployments {
					if deploymentImage(d) == newImage && !rolledOut(d) {
						rolling++
					}
				}
				most, reads = max(most, rolling), reads+1
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return func() (int, int) {
		cancel()
		wg.Wait()
		return most, reads
	}
}

func deploymentImage(d *appsv1.Deployment) string {
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "consul-dataplane" {
			return c.Image
		}
	}
	return ""
}

// rolledOut is kubectl rollout status's test: the controller has seen the generation
// and every pod is of the current template and available.
func rolledOut(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.Replicas == want && s.AvailableReplicas == want
}
