package dataplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// TestGatewayServiceAccountOnlyForGatewayPods installs deploy/'s gateway-pods policy,
// bound to one namespace, where a ServiceAccount labelled as the controller labels a
// gateway's stands for one. A tenant (any user but the controller and the
// kube-controller-manager) cannot run a bare pod as it, not even one that claims a
// ReplicaSet as its controller, nor create a ReplicaSet or Deployment naming it, nor
// take its label off; a pod as another ServiceAccount is admitted. A Deployment the
// controller writes still runs: the real kube-controller-manager creates its
// ReplicaSet and pod (the harness's authenticates as the admin, so the policy is
// installed with that name in place of system:kube-controller-manager).
func TestGatewayServiceAccountOnlyForGatewayPods(t *testing.T) {
	ctx := t.Context()
	ns := env.NewNamespace(t, "gwpods")
	installGatewayPodsPolicy(t, ns)
	const gatewaySA = "edge-gwpods"
	env.Create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gatewaySA,
		Labels: map[string]string{dataplane.ManagedByLabel: dataplane.ManagedByValue}}})
	env.Create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-app"}})
	tenant := impersonating(t, "tenant")
	controller := impersonating(t, "system:serviceaccount:"+ns+":consul-gateway-controller")

	testenv.Eventually(t, 30*time.Second, "the policy in effect", func(ctx context.Context) error {
		_, err := tenant.CoreV1().Pods(ns).Create(ctx, barePod(ns, "probe", gatewaySA), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if isGatewayPodsDenial(err, "rule gateway-pods") {
			return nil
		}
		if err == nil {
			return errors.New("a bare pod as the gateway's ServiceAccount admitted, want refused")
		}
		return fmt.Errorf("a bare pod as the gateway's ServiceAccount, want refused: %w", err)
	})

	forged := barePod(ns, "forged", gatewaySA)
	forged.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "edge", UID: "0c5b2f7e-0000-4000-8000-000000000000", Controller: new(true)}}
	sa, err := env.KubeClient.CoreV1().ServiceAccounts(ns).Get(ctx, gatewaySA, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sa.Labels = nil
	for _, c := range []struct {
		what, rule string
		write      func(context.Context) error
	}{
		{"a bare pod", "rule gateway-pods", func(ctx context.Context) error {
			_, err := tenant.CoreV1().Pods(ns).Create(ctx, barePod(ns, "bare", gatewaySA), metav1.CreateOptions{})
			return err
		}},
		{"a pod claiming a ReplicaSet", "rule gateway-pods", func(ctx context.Context) error {
			_, err := tenant.CoreV1().Pods(ns).Create(ctx, forged, metav1.CreateOptions{})
			return err
		}},
		{"a ReplicaSet", "rule gateway-replicasets", func(ctx context.Context) error {
			_, err := tenant.AppsV1().ReplicaSets(ns).Create(ctx, replicaSet(ns, "rs", gatewaySA), metav1.CreateOptions{})
			return err
		}},
		{"a Deployment", "rule gateway-deployments", func(ctx context.Context) error {
			_, err := tenant.AppsV1().Deployments(ns).Create(ctx, deployment(ns, "tenant-deploy", gatewaySA), metav1.CreateOptions{})
			return err
		}},
		{"the ServiceAccount without its label", "rule gateway-serviceaccount", func(ctx context.Context) error {
			_, err := tenant.CoreV1().ServiceAccounts(ns).Update(ctx, sa, metav1.UpdateOptions{})
			return err
		}},
	} {
		if err := c.write(ctx); !isGatewayPodsDenial(err, c.rule) {
			t.Errorf("a tenant's %s with the gateway's ServiceAccount: %v, want refused by %s", c.what, err, c.rule)
		}
	}
	if _, err := tenant.CoreV1().Pods(ns).Create(ctx, barePod(ns, "app", "tenant-app"), metav1.CreateOptions{}); err != nil {
		t.Errorf("a tenant's pod as its own ServiceAccount: %v, want admitted", err)
	}

	// The controller's Deployment: the kube-controller-manager's ReplicaSet and pod
	// are admitted.
	if _, err := controller.AppsV1().Deployments(ns).Create(ctx, deployment(ns, gatewaySA, gatewaySA), metav1.CreateOptions{}); err != nil {
		t.Fatalf("the controller's Deployment: %v", err)
	}
	var gatewayPod string
	testenv.Eventually(t, 60*time.Second, "the gateway Deployment's pod created", func(ctx context.Context) error {
		pods, err := env.KubeClient.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + gatewaySA})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 || pods.Items[0].Spec.ServiceAccountName != gatewaySA {
			return fmt.Errorf("%d pods", len(pods.Items))
		}
		gatewayPod = pods.Items[0].Name
		return nil
	})

	// Into the gateway pod, its token is a file away: no ephemeral container for a
	// tenant.
	pod, err := env.KubeClient.CoreV1().Pods(ns).Get(ctx, gatewayPod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.ResourceVersion = "" // kwok writes the pod's status meanwhile
	pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: "debug", Image: "example.com/debug", TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent}})
	if _, err := tenant.CoreV1().Pods(ns).UpdateEphemeralContainers(ctx, gatewayPod, pod, metav1.UpdateOptions{}); !isGatewayPodsDenial(err, "rule gateway-ephemeral") {
		t.Errorf("a tenant's ephemeral container in the gateway pod: %v, want refused by rule gateway-ephemeral", err)
	}

	// Nor through exec, attach or port-forward. Into the tenant's own pod they pass
	// admission: the API server then wants a stream upgrade (these requests carry none),
	// so nothing is dialled either way.
	for _, sub := range []string{"exec", "attach", "portforward"} {
		if err := connectPod(ctx, tenant, ns, gatewayPod, sub); !isGatewayPodsDenial(err, "rule gateway-connect") {
			t.Errorf("a tenant's %s into the gateway pod: %v, want refused by rule gateway-connect", sub, err)
		}
		if err := connectPod(ctx, tenant, ns, "app", sub); err == nil || apierrors.IsForbidden(err) {
			t.Errorf("a tenant's %s into its own pod: %v, want admitted (and then refused for want of an upgrade)", sub, err)
		}
	}
}

// connectPod sends the CONNECT request of subresource (exec, attach, portforward) of
// pod as client, without asking for a stream: admission judges it all the same.
func connectPod(ctx context.Context, client kubernetes.Interface, ns, pod, subresource string) error {
	req := client.CoreV1().RESTClient().Post().Namespace(ns).Resource("pods").Name(pod).SubResource(subresource)
	switch subresource {
	case "exec":
		req = req.Param("command", "cat").Param("command", "/var/run/secrets/kubernetes.io/serviceaccount/token").Param("stdout", "true")
	case "attach":
		req = req.Param("stdout", "true")
	case "portforward":
		req = req.Param("ports", "19000")
	}
	return req.Do(ctx).Error()
}

// installGatewayPodsPolicy creates deploy/'s gateway-pods policy and its binding,
// narrowed to namespace ns so the package's other tests, whose controller runs as the
// admin, are not held to it; both go when the test ends.
func installGatewayPodsPolicy(t *testing.T, ns string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "validatingadmissionpolicy-gateway-pods.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The harness's kube-controller-manager authenticates as the admin, where a
	// cluster's does as system:kube-controller-manager (or, with
	// --use-service-account-credentials, as each controller's ServiceAccount).
	const kcm = "'system:kube-controller-manager'"
	if n := bytes.Count(raw, []byte(kcm)); n != 3 {
		t.Fatalf("the gateway-pods policy names %s %d times, want 3 (pods, ReplicaSets, Deployments)", kcm, n)
	}
	raw = bytes.ReplaceAll(raw, []byte(kcm), []byte("'"+testenv.AdminUser+"'"))
	docs := bytes.Split(raw, []byte("\n---\n"))
	if len(docs) != 2 {
		t.Fatalf("the gateway-pods policy file has %d documents, want the policy and its binding", len(docs))
	}
	var policy admissionregistrationv1.ValidatingAdmissionPolicy
	var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	if err := errors.Join(yaml.UnmarshalStrict(docs[0], &policy), yaml.UnmarshalStrict(docs[1], &binding)); err != nil {
		t.Fatal(err)
	}
	// The harness's users, its kube-controller-manager included, are in
	// system:masters, which the policy lets be; here it holds them too.
	if len(policy.Spec.MatchConditions) != 1 || policy.Spec.MatchConditions[0].Name != "not-cluster-admin" {
		t.Fatalf("the gateway-pods policy's match conditions: %+v, want only not-cluster-admin", policy.Spec.MatchConditions)
	}
	policy.Spec.MatchConditions = nil
	policy.Name, binding.Name = ns, ns
	binding.Spec.PolicyName = ns
	binding.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}}
	admission := env.KubeClient.AdmissionregistrationV1()
	if _, err := admission.ValidatingAdmissionPolicies().Create(t.Context(), &policy, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the gateway-pods policy: %v", err)
	}
	t.Cleanup(func() {
		_ = admission.ValidatingAdmissionPolicyBindings().Delete(context.Background(), ns, metav1.DeleteOptions{})
		_ = admission.ValidatingAdmissionPolicies().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	if _, err := admission.ValidatingAdmissionPolicyBindings().Create(t.Context(), &binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the gateway-pods policy binding: %v", err)
	}
}

// impersonating is a client of the admin acting as user in system:masters: RBAC lets
// it do anything, and admission sees user.
func impersonating(t *testing.T, user string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(env.Kube.Config(testenv.AdminUser))
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters", "system:authenticated"}}
	return kubernetes.NewForConfigOrDie(cfg)
}

func isGatewayPodsDenial(err error, rule string) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), rule)
}

func barePod(ns, name, serviceAccount string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       podSpec(serviceAccount),
	}
}

func podSpec(serviceAccount string) corev1.PodSpec {
	return corev1.PodSpec{ServiceAccountName: serviceAccount, Containers: []corev1.Container{{Name: "app", Image: "example.com/app"}}}
}

func podTemplate(name, serviceAccount string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}, Spec: podSpec(serviceAccount)}
}

func replicaSet(ns, name, serviceAccount string) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.ReplicaSetSpec{Replicas: new(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name, serviceAccount)},
	}
}

func deployment(ns, name, serviceAccount string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{Replicas: new(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: podTemplate(name, serviceAccount)},
	}
}
