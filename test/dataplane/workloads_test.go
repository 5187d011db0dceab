package dataplane

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// The cluster the data-plane tests run on does what a real one does with a
// Deployment, without containers: a ReplicaSet, Pods scheduled to a fake Node that
// become Running and Ready with an IP, a Service's EndpointSlice listing them, and the
// garbage collector removing what the Deployment owned once it is deleted.
func TestWorkloadsRollOutADeployment(t *testing.T) {
	ctx := t.Context()
	ns := env.NewNamespace(t, "rollout")
	labels := map[string]string{"app": "echo"}
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "echo", Image: "example.invalid/echo:1",
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				}}},
			},
		},
	}
	apps := env.KubeClient.AppsV1().Deployments(ns)
	if _, err := apps.Create(ctx, deployment, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	service := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{
			Name: "http", Port: 80, TargetPort: intstr.FromString("http"),
		}}},
	}
	if _, err := env.KubeClient.CoreV1().Services(ns).Create(ctx, service, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	testenv.Eventually(t, 60*time.Second, "the Deployment is available with 2 ready replicas", func(ctx context.Context) error {
		d, err := apps.Get(ctx, "echo", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.ReadyReplicas != 2 || d.Status.AvailableReplicas != 2 {
			return fmt.Errorf("ready %d, available %d", d.Status.ReadyReplicas, d.Status.AvailableReplicas)
		}
		return nil
	})
	pods, err := env.KubeClient.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=echo"})
	if err != nil {
		t.Fatal(err)
	}
	podIPs := map[string]bool{}
	for _, pod := range pods.Items {
		if pod.Spec.NodeName != env.Workloads.Nodes[0] || pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
			t.Errorf("pod %s: node %q, phase %s, IP %q; want Running with an IP on %s", pod.Name, pod.Spec.NodeName, pod.Status.Phase, pod.Status.PodIP, env.Workloads.Nodes[0])
		}
		if len(pod.OwnerReferences) != 1 || pod.OwnerReferences[0].Kind != "ReplicaSet" {
			t.Errorf("pod %s owners %v, want its ReplicaSet", pod.Name, pod.OwnerReferences)
		}
		podIPs[pod.Status.PodIP] = true
	}
	if len(podIPs) != 2 {
		t.Errorf("pod IPs %v, want 2 distinct", podIPs)
	}

	testenv.Eventually(t, 30*time.Second, "the Service's EndpointSlice lists both pods, ready", func(ctx context.Context) error {
		slices, err := env.KubeClient.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=echo"})
		if err != nil {
			return err
		}
		ready := map[string]bool{}
		for _, slice := range slices.Items {
			for _, e := range slice.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					for _, a := range e.Addresses {
						ready[a] = true
					}
				}
			}
		}
		for ip := range podIPs {
			if !ready[ip] {
				return fmt.Errorf("ready endpoints %v lack pod IP %s", ready, ip)
			}
		}
		return nil
	})

	if err := apps.Delete(ctx, "echo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "the garbage collector removes the ReplicaSet and its pods", func(ctx context.Context) error {
		sets, err := env.KubeClient.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		pods, err := env.KubeClient.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(sets.Items)+len(pods.Items) > 0 {
			return fmt.Errorf("%d ReplicaSets and %d pods left", len(sets.Items), len(pods.Items))
		}
		return nil
	})
}
