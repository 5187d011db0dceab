package dataplane

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// TestForeignPodNotRegistered: a tenant of another namespace, with a Gateway of its
// own, creates a pod labelled as that Gateway's gateway pod and named like a gateway pod
// of the first namespace, on the same node. It is not the Gateway's pod, so it is never
// registered, and the first namespace's instance stays as it is: before, both were
// registered under the pod's name on the shared synthetic node and replaced each other.
func TestForeignPodNotRegistered(t *testing.T) {
	g := newGatewayCase(t, "victim", corev1.ServiceTypeClusterIP)
	g.programmed("True/Programmed", 60*time.Second)
	victimService := translate.Naming{}.EntryName(g.ns, "edge")
	g.instancesMatchPods(victimService, 2)
	pods, err := env.KubeClient.CoreV1().Pods(g.ns).List(t.Context(), metav1.ListOptions{LabelSelector: dataplane.PodSelector(keyOf(g)).String()})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("the victim's gateway pods: %v (%v)", pods, err)
	}
	victimPod := pods.Items[0]
	before := catalogVersions(t, victimService)

	evil := env.NewNamespace(t, "evil")
	env.Create(t, testenv.Gateway(evil, "edge", g.class, testenv.HTTPListener("http", 80)))
	evilService := translate.Naming{}.EntryName(evil, "edge")
	// Deleted with its namespace.
	if _, err := env.KubeClient.CoreV1().Pods(evil).Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: evil, Name: victimPod.Name, Labels: victimPod.Labels},
		Spec: corev1.PodSpec{
			NodeName:   victimPod.Spec.NodeName,
			Containers: []corev1.Container{{Name: "impostor", Image: "example.com/impostor"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Without an IP the impostor would never be registered, taken for a gateway pod
	// or not: it must have one (kwok gives it one, as a kubelet would) before its
	// absence from the catalog means anything.
	testenv.Eventually(t, 60*time.Second, "the impostor pod running with an IP", func(ctx context.Context) error {
		pod, err := env.KubeClient.CoreV1().Pods(evil).Get(ctx, victimPod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pod.Status.PodIP == "" || pod.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s, IP %q", pod.Status.Phase, pod.Status.PodIP)
		}
		return nil
	})
	// The evil Gateway's own pods registered, and the registrar idle after looking at
	// every pod: the impostor too would be registered by now, were it taken for one.
	testenv.Eventually(t, 60*time.Second, "the evil Gateway's own pods registered", func(ctx context.Context) error {
		entries, _, err := env.ConsulClient.Health().Service(evilService, "", true, (&consulapi.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return err
		}
		if len(entries) == 0 {
			return fmt.Errorf("%d passing instances", len(entries))
		}
		return nil
	})
	testenv.Settled(t, g.controller, "catalog")
	entries, _, err := env.ConsulClient.Health().Service(evilService, "", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Service.Meta["k8s-pod"] == victimPod.Name {
			t.Errorf("the impostor pod %s/%s is registered as %s instance %s", evil, victimPod.Name, evilService, e.Service.ID)
		}
	}
	victims, _, err := env.ConsulClient.Health().Service(victimService, "", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range victims {
		if e.Service.Meta["k8s-pod"] == victimPod.Name {
			found = e.Service.Address == victimPod.Status.PodIP && e.Service.ID == dataplane.ProxyServiceID(&victimPod)
		}
	}
	if !found {
		t.Errorf("the victim's instance of pod %s is gone or changed: %v", victimPod.Name, victims)
	}
	if changes := before.Changes(catalogVersions(t, victimService)); len(changes) > 0 {
		t.Errorf("the victim's instances were written while the impostor was around: %s", strings.Join(changes, "; "))
	}
}

// catalogVersions are the ModifyIndexes of service's catalog instances: Consul raises
// one on every write of the instance, whoever makes it.
func catalogVersions(t *testing.T, service string) testenv.Versions {
	t.Helper()
	instances, _, err := env.ConsulClient.Catalog().Service(service, "", (&consulapi.QueryOptions{RequireConsistent: true}).WithContext(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	v := testenv.Versions{}
	for _, in := range instances {
		v["instance "+in.ServiceID] = strconv.FormatUint(in.ModifyIndex, 10)
	}
	return v
}
