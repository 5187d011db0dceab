package dataplane

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// The owned caches hold the controller's objects and nothing else: unrelated
// Deployments, Services, ServiceAccounts and pods in the cluster cost them no memory.
func TestOwnedCachesHoldOnlyManagedObjects(t *testing.T) {
	ctx := t.Context()
	ns := env.NewNamespace(t, "unrelated")
	labels := map[string]string{"app": "unrelated"}
	for i := range 3 {
		name := fmt.Sprintf("unrelated-%d", i)
		if _, err := env.KubeClient.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DeploymentSpec{
				Replicas: new(int32(2)),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c:1"}}},
				},
			},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := env.KubeClient.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 60*time.Second, "the unrelated pods exist", func(ctx context.Context) error {
		pods, err := env.KubeClient.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items) != 6 {
			return fmt.Errorf("%d pods", len(pods.Items))
		}
		return nil
	})

	owned := informers.NewOwned(env.KubeClient, dataplane.ManagedSelector, 0)
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		owned.Shutdown()
	}()
	owned.StartWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), owned.HasSynced()...) {
		t.Fatal("owned caches did not sync")
	}
	for kind, store := range map[string]cache.Store{
		"Deployment":     owned.Deployments.Informer().GetStore(),
		"Service":        owned.Services.Informer().GetStore(),
		"ServiceAccount": owned.ServiceAccounts.Informer().GetStore(),
		"Pod":            owned.Pods.Informer().GetStore(),
	} {
		for _, obj := range store.List() {
			o := obj.(metav1.Object)
			if o.GetLabels()[dataplane.ManagedByLabel] != dataplane.ManagedByValue {
				t.Errorf("the %s cache holds %s/%s, which the controller does not manage", kind, o.GetNamespace(), o.GetName())
			}
			if o.GetNamespace() == ns {
				t.Errorf("the %s cache holds the unrelated %s", kind, o.GetName())
			}
		}
		t.Logf("%s cache: %d objects", kind, len(store.List()))
	}
}
