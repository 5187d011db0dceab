package dataplane

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// A Gateway whose pods cannot run says what they report in its Programmed message: a
// crash loop with the container's last exit and the last line of its termination
// message, an image that cannot be pulled, a Secret the container needs that is
// missing (kwok sets these container states), and a pod the scheduler cannot place
// (the real scheduler, for a nodeSelector no Node matches).
func TestProgrammedSaysWhatThePodsReport(t *testing.T) {
	ns := env.NewNamespace(t, "podproblems")
	controllerName := gatewayv1.GatewayController("consul-gateway-controller.github.io/" + ns)
	// A cluster IP for every Gateway: only its pods keep it from being Programmed.
	env.Create(t, &v1alpha1.GatewayConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "class"},
		Spec:       v1alpha1.GatewayConfigSpec{Service: &v1alpha1.ServiceConfig{Type: new(corev1.ServiceTypeClusterIP)}},
	})
	createClass(t, ns, controllerName, &gatewayv1.ParametersReference{
		Group: v1alpha1.GroupName, Kind: v1alpha1.GatewayConfigKind, Name: "class", Namespace: new(gatewayv1.Namespace(ns)),
	})
	startController(t, ns, controllerName, "--gateway-infrastructure-keys=testenv.consul-gateway-controller.github.io/*")
	env.Create(t, &v1alpha1.GatewayConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nowhere"},
		Spec:       v1alpha1.GatewayConfigSpec{NodeSelector: map[string]string{"example.com/pool": "none"}},
	})

	for _, tc := range []struct {
		gateway string
		state   string // the pods' ContainerStateLabel
		config  string // the Gateway's own GatewayConfig
		// want is what the pod reports, after "pod <namespace>/<name>: ".
		want func(pod *corev1.Pod) string
		// prefix: the report starts with want (the scheduler's message goes on).
		prefix bool
	}{{
		gateway: "crash", state: testenv.ContainerStateCrashLoopBackOff,
		want: func(*corev1.Pod) string {
			return "container consul-dataplane: CrashLoopBackOff; last exit 1 (Error): " + testenv.ContainerStateCrashLoopBackOffLine
		},
	}, {
		gateway: "pull", state: testenv.ContainerStateImagePullBackOff,
		want: func(pod *corev1.Pod) string {
			return fmt.Sprintf("container consul-dataplane: ImagePullBackOff: failed to pull and unpack image %q: not found", pod.Spec.Containers[0].Image)
		},
	}, {
		gateway: "config", state: testenv.ContainerStateCreateContainerConfigError,
		want: func(*corev1.Pod) string {
			return `container consul-dataplane: CreateContainerConfigError: secret "consul-ca" not found`
		},
	}, {
		gateway: "nowhere", config: "nowhere",
		want: func(*corev1.Pod) string {
			return "Unschedulable: 0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
		},
		prefix: true,
	}} {
		gw := testenv.Gateway(ns, tc.gateway, ns, testenv.HTTPListener("http", 80))
		gw.Spec.Infrastructure = &gatewayv1.GatewayInfrastructure{}
		if tc.state != "" {
			gw.Spec.Infrastructure.Labels = map[gatewayv1.LabelKey]gatewayv1.LabelValue{testenv.ContainerStateLabel: gatewayv1.LabelValue(tc.state)}
		}
		if tc.config != "" {
			gw.Spec.Infrastructure.ParametersRef = &gatewayv1.LocalParametersReference{Group: v1alpha1.GroupName, Kind: v1alpha1.GatewayConfigKind, Name: tc.config}
		}
		env.Create(t, gw)
		t.Run(tc.gateway, func(t *testing.T) {
			t.Parallel()
			testenv.Eventually(t, 90*time.Second, "Gateway "+tc.gateway+" says what its pod reports", func(ctx context.Context) error {
				pod, err := onlyPod(ctx, gw)
				if err != nil {
					return err
				}
				got, err := programmedText(ctx, ns, tc.gateway)
				if err != nil {
					return err
				}
				want := fmt.Sprintf("False/Pending: Consul accepted the api-gateway entry; no gateway pod is Ready: pod %s/%s: %s", ns, pod.Name, tc.want(pod))
				if got == want || (tc.prefix && strings.HasPrefix(got, want)) {
					return nil
				}
				return fmt.Errorf("Programmed %q\nwant %q", got, want)
			})
		})
	}
}

// onlyPod is the one pod of the Gateway.
func onlyPod(ctx context.Context, gw *gatewayv1.Gateway) (*corev1.Pod, error) {
	list, err := env.KubeClient.CoreV1().Pods(gw.Namespace).List(ctx, metav1.ListOptions{LabelSelector: dataplane.PodSelector(cache.MetaObjectToName(gw)).String()})
	if err != nil {
		return nil, err
	}
	if len(list.Items) != 1 {
		return nil, fmt.Errorf("%d pods of Gateway %s, want 1", len(list.Items), gw.Name)
	}
	return &list.Items[0], nil
}

// programmedText is the Gateway's Programmed condition as "Status/Reason: message".
func programmedText(ctx context.Context, ns, name string) (string, error) {
	gw, err := env.GatewayClient.GatewayV1().Gateways(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return testenv.ConditionText(gw.Status.Conditions, "Programmed"), nil
}

// A Gateway named with 100 characters (valid for a Gateway, too long for the
// gateway-name label its objects and pods carry) is accepted, and so is its api-gateway
// entry in Consul; it says in Programmed why it is not deployed, and nothing is
// written for it, not even an apply the API server refuses; a Gateway beside it is
// deployed.
func TestGatewayWithTooLongANameIsNotDeployed(t *testing.T) {
	ns := env.NewNamespace(t, "longname")
	controllerName := gatewayv1.GatewayController("consul-gateway-controller.github.io/" + ns)
	createClass(t, ns, controllerName, nil)
	c := startController(t, ns, controllerName)
	long := testenv.Gateway(ns, strings.Repeat("l", 100), ns, testenv.HTTPListener("http", 80))
	short := testenv.Gateway(ns, "short", ns, testenv.HTTPListener("http", 80))
	env.Create(t, long)
	env.Create(t, short)

	wantProgrammed := fmt.Sprintf("False/Invalid: The Gateway's pods cannot be deployed, and nothing is written for them: label %s=%q: must be no more than 63 bytes",
		dataplane.GatewayNameLabel, long.Name)
	testenv.Eventually(t, 60*time.Second, "the long-named Gateway accepted, and Programmed says why it is not deployed", func(ctx context.Context) error {
		gw, err := env.GatewayClient.GatewayV1().Gateways(ns).Get(ctx, long.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := testenv.ConditionTrue(gw.Status.Conditions, "Accepted"); err != nil {
			return err
		}
		if got := testenv.ConditionText(gw.Status.Conditions, "Programmed"); !strings.HasPrefix(got, wantProgrammed) {
			return fmt.Errorf("Programmed %q\nwant it to start %q", got, wantProgrammed)
		}
		return nil
	})
	// Consul takes the long name as it is: its api-gateway entry is written and accepted.
	entry := translate.Naming{}.EntryName(ns, long.Name)
	testenv.Eventually(t, 60*time.Second, "Consul accepts the api-gateway entry "+entry, func(ctx context.Context) error {
		raw, _, err := env.ConsulClient.ConfigEntries().Get(consulapi.APIGateway, entry, (&consulapi.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return err
		}
		for _, c := range raw.(*consulapi.APIGatewayConfigEntry).Status.Conditions {
			if c.Type == "Accepted" && c.Status == consulapi.ConditionStatusTrue {
				return nil
			}
		}
		return fmt.Errorf("not accepted: %+v", raw.(*consulapi.APIGatewayConfigEntry).Status)
	})
	testenv.Eventually(t, 60*time.Second, "the short-named Gateway's Deployment", func(ctx context.Context) error {
		_, err := env.KubeClient.AppsV1().Deployments(ns).Get(ctx, dataplane.Name(short), metav1.GetOptions{})
		return err
	})

	metrics := testenv.Settled(t, c, "dataplane")
	const applies = "consul_gateway_controller_gateway_object_applies_total"
	if failed := testenv.MetricSum(metrics, applies) - testenv.MetricSum(metrics, applies, `result="ok"`); failed != 0 {
		t.Errorf("%v applies failed, want none: nothing is tried for the long-named Gateway", failed)
	}
	ctx := t.Context()
	name := dataplane.Name(long)
	for kind, get := range map[string]func() error{
		"ServiceAccount": func() error {
			_, err := env.KubeClient.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
			return err
		},
		"Deployment": func() error {
			_, err := env.KubeClient.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			return err
		},
		"Service": func() error {
			_, err := env.KubeClient.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
			return err
		},
	} {
		if err := get(); !apierrors.IsNotFound(err) {
			t.Errorf("%s %s/%s of the long-named Gateway: %v, want none", kind, ns, name, err)
		}
	}
}
