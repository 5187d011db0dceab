package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// The ValidatingAdmissionPolicy of deploy/ (validatingadmissionpolicy.yaml), which
// narrows the controller's cluster-wide write on Deployments, Services and
// ServiceAccounts to the data-plane objects it makes for Gateways.

// gatewaysNamespaceLabels opt a namespace in to the controller's writes: the policy
// refuses them in any namespace without.
var gatewaysNamespaceLabels = map[string]string{"consul-gateway-controller.github.io/gateways": "enabled"}

// policyGateway is a Gateway and the ServiceAccount, Deployment, Service and
// PodDisruptionBudget that dataplane.Desired makes for it: what the controller writes, and what the policy must
// let it write.
type policyGateway struct {
	gateway *gatewayv1.Gateway
	sa      *corev1.ServiceAccount
	deploy  *appsv1.Deployment
	svc     *corev1.Service
	budget  *policyv1.PodDisruptionBudget
}

// newPolicyGateway creates the Gateway ns/name of class, which no controller serves.
// Its parameters name a CA Secret, so the pods have every kind of volume
// dataplane.Desired gives them.
func newPolicyGateway(t *testing.T, ns, name, class string) policyGateway {
	t.Helper()
	gw := testenv.Gateway(ns, name, class, testenv.HTTPListener("http", 8080))
	env.Create(t, gw)
	gwClass := &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec: gatewayv1.GatewayClassSpec{ControllerName: "example.com/policy"}}
	config := &v1alpha1.GatewayConfig{Spec: v1alpha1.GatewayConfigSpec{
		Consul: &v1alpha1.ConsulConnection{TLS: &v1alpha1.ConsulTLS{CASecretName: "consul-ca"}}}}
	desired := dataplane.Desired(dataplane.Gateway{Gateway: gw, Class: gwClass, Config: config},
		dataplane.Defaults{Image: "example.invalid/consul-dataplane:1", ConsulAddress: "consul.invalid", GRPCPort: 8502})
	g := policyGateway{gateway: gw, sa: &corev1.ServiceAccount{}, deploy: &appsv1.Deployment{}, svc: &corev1.Service{}, budget: &policyv1.PodDisruptionBudget{}}
	for from, into := range map[any]any{desired.ServiceAccount: g.sa, desired.Deployment: g.deploy, desired.Service: g.svc, desired.PodDisruptionBudget: g.budget} {
		data, err := json.Marshal(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, into); err != nil {
			t.Fatal(err)
		}
	}
	g.deploy.Spec.Replicas = new(int32(0)) // no pods: only the objects are judged
	return g
}

// policyCase is one request the policy must refuse the controller and let another
// user with the same RBAC make.
type policyCase struct {
	name string
	rule string // the rule whose message the refusal must carry
	// policy is the policy that refuses, when not the main one (r.policy).
	policy string
	// setup makes, as the admin, what the request needs.
	setup   func(t *testing.T, g policyGateway)
	request func(ctx context.Context, c kubernetes.Interface, g policyGateway) error
}

// TestDeployPolicyRefusesForeignWorkloads applies deploy/ and acts as the controller's
// ServiceAccount, with the token and ClusterRole deploy/ gives it: each write that is
// not one of its Gateways' own objects, as dataplane.Desired makes them, is refused by
// the policy with the message of the rule that refused, and the same request by
// another ServiceAccount bound to the same ClusterRole is admitted. The objects the
// controller does make are created, changed and deleted.
func TestDeployPolicyRefusesForeignWorkloads(t *testing.T) {
	r := renderDeploy(t)
	admin := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.Kube.WriteKubeconfig(admin, testenv.AdminUser); err != nil {
		t.Fatal(err)
	}
	if out, err := kubectl(t, admin, "apply", "-k", r.dir); err != nil {
		t.Fatalf("kubectl apply -k deploy: %v\n%s", err, out)
	}
	user := serviceaccountUser(deployNamespace, deployName)
	for _, rule := range r.clusterRole.Rules {
		waitAuthorized(t, user, rule, "")
	}
	controller := serviceAccountClient(t, deployNamespace, deployName)
	waitPolicyInEffect(t, r, controller)
	checkPolicyTypes(t, r.policy.Name)
	checkPolicyTypes(t, foreignServiceAccountsPolicy)
	checkPolicyTypes(t, gatewayClassesPolicy)

	ns := "policy-" + utilrand.String(5)
	env.Create(t, testenv.Namespace(ns, gatewaysNamespaceLabels))
	// Where the cluster admin did not opt in: the label's value must be "enabled".
	unlabelled := ns + "-unlabelled"
	env.Create(t, testenv.Namespace(unlabelled, map[string]string{"consul-gateway-controller.github.io/gateways": "disabled"}))
	// Another identity with exactly the controller's grants: what tells the two apart
	// is the policy's match on the ServiceAccount, not RBAC.
	env.Create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workloads"}})
	env.Create(t, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-workloads"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r.clusterRole.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "workloads"}},
	})
	for _, rule := range r.clusterRole.Rules {
		waitAuthorized(t, serviceaccountUser(ns, "workloads"), rule, "")
	}
	other := serviceAccountClient(t, ns, "workloads")

	create := metav1.CreateOptions{}
	// inNamespace moves the Deployment to namespace (kube-system, the controller's
	// own), deleted there when the test ends: the other user's create succeeds.
	inNamespace := func(t *testing.T, d *appsv1.Deployment, namespace string) {
		d.Namespace = namespace
		t.Cleanup(func() {
			_ = env.KubeClient.AppsV1().Deployments(namespace).Delete(context.Background(), d.Name, metav1.DeleteOptions{})
		})
	}
	createDeployment := func(edit func(t *testing.T, d *appsv1.Deployment)) func(context.Context, kubernetes.Interface, policyGateway) error {
		return func(ctx context.Context, c kubernetes.Interface, g policyGateway) error {
			d := g.deploy.DeepCopy()
			edit(t, d)
			_, err := c.AppsV1().Deployments(d.Namespace).Create(ctx, d, create)
			return err
		}
	}
	cases := []policyCase{{
		name: "create an unlabelled Deployment in kube-system", rule: "namespace",
		request: func(ctx context.Context, c kubernetes.Interface, g policyGateway) error {
			d := g.deploy.DeepCopy()
			d.Labels, d.OwnerReferences, d.Annotations = map[string]string{"app": "x"}, nil, nil
			inNamespace(t, d, "kube-system")
			_, err := c.AppsV1().Deployments(d.Namespace).Create(ctx, d, create)
			return err
		},
	}, {
		name: "create a Gateway's Deployment in the controller's own namespace", rule: "namespace",
		request: createDeployment(func(t *testing.T, d *appsv1.Deployment) { inNamespace(t, d, deployNamespace) }),
	}, {
		// A namespace where, say, argocd-server exists: a Gateway argocd of class
		// server would run as it.
		name: "create a Gateway's Deployment in a namespace that did not opt in", rule: "namespace-label",
		request: createDeployment(func(t *testing.T, d *appsv1.Deployment) { inNamespace(t, d, unlabelled) }),
	}, {
		name: "create a Gateway's Service in a namespace that did not opt in", rule: "namespace-label",
		request: func(ctx context.Context, c kubernetes.Interface, g policyGateway) error {
			s := g.svc.DeepCopy()
			s.Namespace = unlabelled
			t.Cleanup(func() {
				_ = env.KubeClient.CoreV1().Services(unlabelled).Delete(context.Background(), s.Name, metav1.DeleteOptions{})
			})
			_, err := c.CoreV1().Services(s.Namespace).Create(ctx, s, create)
			return err
		},
	}, {
		name: "create a Deployment without the managed-by label", rule: "managed-by",
		request: createDeployment(func(_ *testing.T, d *appsv1.Deployment) {
			delete(d.Labels, dataplane.ManagedByLabel)
		}),
	}, {
		name: "create a Deployment without a Gateway owner", rule: "gateway-owner",
		request: createDeployment(func(_ *testing.T, d *appsv1.Deployment) { d.OwnerReferences = nil }),
	}, {
		// A Deployment named "payments" would run as a ServiceAccount payments and
		// still pass pod-serviceaccount. (None exists here: the refusal of one that
		// exists, as "default" does, is foreign-serviceaccount's below, and only one
		// policy's refusal is reported.)
		name: "create a Deployment named after no Gateway", rule: "name",
		request: createDeployment(func(_ *testing.T, d *appsv1.Deployment) {
			d.Name, d.Spec.Template.Spec.ServiceAccountName = "payments", "payments"
		}),
	}, {
		name: "create a Deployment whose pods run as another ServiceAccount", rule: "pod-serviceaccount",
		request: createDeployment(func(_ *testing.T, d *appsv1.Deployment) { d.Spec.Template.Spec.ServiceAccountName = "payments" }),
	}, {
		// Another team's ServiceAccount of the name a Gateway's takes: the Deployment
		// is the Gateway's own in every other respect.
		name: "create a Deployment whose pods run as a ServiceAccount another team made", rule: "foreign-serviceaccount",
		policy: foreignServiceAccountsPolicy,
		setup: func(t *testing.T, g policyGateway) {
			env.Create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: g.sa.Namespace, Name: g.sa.Name}})
			waitParameter(t, controller, g.deploy)
		},
		request: createDeployment(func(*testing.T, *appsv1.Deployment) {}),
	}, {
		name: "create a Deployment whose pods mount the node's filesystem", rule: "pod-volumes",
		request: createDeployment(func(_ *testing.T, d *appsv1.Deployment) {
			d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{Name: "root",
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		}),
	}, {
		name: "create a Deployment whose pods mount a PersistentVolumeClaim", rule: "pod-volumes",
		request: createDeployment(func(_ *testing.T, d *appsv1.Deployment) {
			d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{Name: "data",
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}})
		}),
	}, {
		name: "create a Deployment whose pods mount a ConfigMap", rule: "pod-volumes",
		request: createDeployment(func(_ *testing.T, d *appsv1.Deployment) {
			d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{Name: "config",
				VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}}})
		}),
	}, {
		name: "create a Deployment whose pods name their node", rule: "pod-node-name",
		request: createDeployment(func(_ *testing.T, d *appsv1.Deployment) { d.Spec.Template.Spec.NodeName = "node-1" }),
	}, {
		// NET_BIND_SERVICE is the one capability a container may add.
		name: "create a Deployment whose container adds NET_ADMIN", rule: "pod-host",
		request: createDeployment(func(_ *testing.T, d *appsv1.Deployment) {
			addCapabilities(&d.Spec.Template.Spec.Containers[0], "NET_ADMIN")
		}),
	}, {
		name: "create a Deployment whose container adds NET_BIND_SERVICE and SYS_ADMIN", rule: "pod-host",
		request: createDeployment(func(_ *testing.T, d *appsv1.Deployment) {
			addCapabilities(&d.Spec.Template.Spec.Containers[0], "NET_BIND_SERVICE", "SYS_ADMIN")
		}),
	}, {
		name: "create a Deployment whose init container adds NET_BIND_SERVICE", rule: "pod-host",
		request: createDeployment(func(_ *testing.T, d *appsv1.Deployment) {
			initContainer := *d.Spec.Template.Spec.Containers[0].DeepCopy()
			initContainer.Name, initContainer.Ports, initContainer.ReadinessProbe = "init", nil, nil
			addCapabilities(&initContainer, "NET_BIND_SERVICE")
			d.Spec.Template.Spec.InitContainers = append(d.Spec.Template.Spec.InitContainers, initContainer)
		}),
	}, {
		name: "create a Service that selects other pods", rule: "selector",
		request: func(ctx context.Context, c kubernetes.Interface, g policyGateway) error {
			s := g.svc.DeepCopy()
			s.Spec.Selector = map[string]string{"app": "payments"}
			_, err := c.CoreV1().Services(s.Namespace).Create(ctx, s, create)
			return err
		},
	}, {
		// A budget over a tenant's pods would hold them on a draining node.
		name: "create a PodDisruptionBudget that selects other pods", rule: "selector",
		request: func(ctx context.Context, c kubernetes.Interface, g policyGateway) error {
			b := g.budget.DeepCopy()
			b.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "payments"}}
			_, err := c.PolicyV1().PodDisruptionBudgets(b.Namespace).Create(ctx, b, create)
			return err
		},
	}, {
		// Another team's Service of the name a Gateway's takes, made the Gateway's
		// as a forced apply would.
		name: "patch an unlabelled Service into the Gateway's", rule: "existing-object",
		setup: func(t *testing.T, g policyGateway) {
			env.Create(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: g.svc.Namespace, Name: g.svc.Name},
				Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "payments"}, Ports: []corev1.ServicePort{{Port: 9000}}}})
		},
		request: func(ctx context.Context, c kubernetes.Interface, g policyGateway) error {
			return mergePatchService(ctx, c, g.svc, map[string]any{"metadata": map[string]any{
				"labels": g.svc.Labels, "ownerReferences": g.svc.OwnerReferences}})
		},
	}, {
		name: "patch a Gateway's Service to drop the managed-by label", rule: "managed-by",
		setup: func(t *testing.T, g policyGateway) { env.Create(t, g.svc.DeepCopy()) },
		request: func(ctx context.Context, c kubernetes.Interface, g policyGateway) error {
			return mergePatchService(ctx, c, g.svc, map[string]any{"metadata": map[string]any{
				"labels": map[string]any{dataplane.ManagedByLabel: nil}}})
		},
	}, {
		name: "delete an unlabelled ServiceAccount", rule: "existing-object",
		setup: func(t *testing.T, g policyGateway) {
			env.Create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: g.sa.Namespace, Name: g.sa.Name}})
		},
		request: func(ctx context.Context, c kubernetes.Interface, g policyGateway) error {
			return c.CoreV1().ServiceAccounts(g.sa.Namespace).Delete(ctx, g.sa.Name, metav1.DeleteOptions{})
		},
	}}
	denied := policyDenials(t, r.policy.Name) + policyDenials(t, foreignServiceAccountsPolicy)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newPolicyGateway(t, ns, fmt.Sprintf("gw-%d", i), "policy")
			if c.setup != nil {
				c.setup(t, g)
			}
			policy, want := r.policy.Name, "rule "+c.rule+": "
			if c.policy == "" {
				want = r.policyMessage(t, c.rule)
			} else {
				policy = c.policy
			}
			if err := c.request(t.Context(), controller, g); !isPolicyDenial(err, policy, want) {
				t.Errorf("as the controller: %v; want the refusal %q of policy %s", err, want, policy)
			}
			if err := c.request(t.Context(), other, g); err != nil {
				t.Errorf("as another ServiceAccount with the same ClusterRole: %v; want it admitted", err)
			}
		})
	}
	// The API server counts the refusals (one per failed rule): the other deploy
	// tests' "no refusal" rests on this count.
	if denied = policyDenials(t, r.policy.Name) + policyDenials(t, foreignServiceAccountsPolicy) - denied; denied < float64(len(cases)) {
		t.Errorf("the API server counted %v refusals by the policy, want at least %d", denied, len(cases))
	}

	// "<gateway>-<class>" longer than a Service's 63 characters is cut and hashed
	// (dataplane.Name).
	for i, class := range []string{"policy", "policy-" + strings.Repeat("x", 50)} {
		t.Run("the Gateway's own objects are created, changed and deleted/"+class, func(t *testing.T) {
			g := newPolicyGateway(t, ns, fmt.Sprintf("own-%d-%s", i, strings.Repeat("y", 20)), class)
			if shortened := g.deploy.Name != g.gateway.Name+"-"+class; shortened != (i == 1) {
				t.Fatalf("dataplane.Name gave %q: this case is about a name shortened only for the long class", g.deploy.Name)
			}
			// consul-dataplane's image cannot start without it (test/node): the policy
			// must admit it.
			if caps := g.deploy.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities; caps == nil ||
				!slices.Equal(caps.Add, []corev1.Capability{"NET_BIND_SERVICE"}) {
				t.Fatalf("the gateway container's capabilities %+v: want it to add NET_BIND_SERVICE, which the policy must admit", caps)
			}
			// The volume kinds the policy admits, each in use.
			var volumes []string
			for _, v := range g.deploy.Spec.Template.Spec.Volumes {
				volumes = append(volumes, fmt.Sprintf("%s emptyDir=%t secret=%t", v.Name, v.EmptyDir != nil, v.Secret != nil))
			}
			if diff := cmp.Diff([]string{"tmp emptyDir=true secret=false", "consul-ca emptyDir=false secret=true"}, volumes); diff != "" {
				t.Fatalf("the gateway pods' volumes (-want +got):\n%s", diff)
			}
			ownObjects(t, controller, g)
		})
	}
}

// addCapabilities replaces what c adds to its capabilities with caps.
func addCapabilities(c *corev1.Container, caps ...corev1.Capability) {
	if c.SecurityContext == nil {
		c.SecurityContext = &corev1.SecurityContext{}
	}
	if c.SecurityContext.Capabilities == nil {
		c.SecurityContext.Capabilities = &corev1.Capabilities{}
	}
	c.SecurityContext.Capabilities.Add = caps
}

// ownObjects creates, patches and deletes g's objects as client, which must be
// admitted every time.
func ownObjects(t *testing.T, client kubernetes.Interface, g policyGateway) {
	t.Helper()
	ctx, ns, create, del := t.Context(), g.gateway.Namespace, metav1.CreateOptions{}, metav1.DeleteOptions{}
	core, apps := client.CoreV1(), client.AppsV1()
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s as the controller: %v", what, err)
		}
	}
	_, err := core.ServiceAccounts(ns).Create(ctx, g.sa, create)
	step("create the ServiceAccount", err)
	_, err = apps.Deployments(ns).Create(ctx, g.deploy, create)
	step("create the Deployment", err)
	_, err = core.Services(ns).Create(ctx, g.svc, create)
	step("create the Service", err)
	_, err = client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, g.budget, create)
	step("create the PodDisruptionBudget", err)
	annotate := []byte(`{"metadata":{"annotations":{"example.com/changed":"true"}}}`)
	_, err = apps.Deployments(ns).Patch(ctx, g.deploy.Name, types.MergePatchType, annotate, metav1.PatchOptions{})
	step("patch the Deployment", err)
	_, err = core.Services(ns).Patch(ctx, g.svc.Name, types.MergePatchType, annotate, metav1.PatchOptions{})
	step("patch the Service", err)
	_, err = core.ServiceAccounts(ns).Patch(ctx, g.sa.Name, types.MergePatchType, annotate, metav1.PatchOptions{})
	step("patch the ServiceAccount", err)
	_, err = client.PolicyV1().PodDisruptionBudgets(ns).Patch(ctx, g.budget.Name, types.MergePatchType, annotate, metav1.PatchOptions{})
	step("patch the PodDisruptionBudget", err)
	step("delete the PodDisruptionBudget", client.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, g.budget.Name, del))
	step("delete the Deployment", apps.Deployments(ns).Delete(ctx, g.deploy.Name, del))
	step("delete the Service", core.Services(ns).Delete(ctx, g.svc.Name, del))
	step("delete the ServiceAccount", core.ServiceAccounts(ns).Delete(ctx, g.sa.Name, del))
}

// checkPolicyTypes waits for kube-controller-manager to type-check the policy against
// the kinds it matches, and fails on any warning: a field misspelt in an expression
// would otherwise only show as a refusal at run time.
func checkPolicyTypes(t *testing.T, name string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "the policy type-checked", func(ctx context.Context) error {
		p, err := env.KubeClient.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.ObservedGeneration != p.Generation || p.Status.TypeChecking == nil {
			return fmt.Errorf("status of generation %d, policy at %d", p.Status.ObservedGeneration, p.Generation)
		}
		for _, w := range p.Status.TypeChecking.ExpressionWarnings {
			t.Errorf("type checking %s: %s", w.FieldRef, w.Warning)
		}
		return nil
	})
}

func mergePatchService(ctx context.Context, c kubernetes.Interface, svc *corev1.Service, patch map[string]any) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = c.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, data, metav1.PatchOptions{})
	return err
}

// serviceAccountClient is a clientset with a TokenRequest token of the ServiceAccount
// namespace/name.
func serviceAccountClient(t *testing.T, namespace, name string) kubernetes.Interface {
	t.Helper()
	_, token := serviceAccountKubeconfig(t, namespace, name, nil)
	return tokenClient(token)
}

// tokenClient is a clientset that authenticates with token, with no client-side rate
// limit: a poll's last request would otherwise end in the limiter's refusal to wait
// past the deadline rather than in the API server's answer.
func tokenClient(token string) kubernetes.Interface {
	cfg := rest.CopyConfig(env.Kube.Config(testenv.AdminUser))
	cfg.BearerToken = token
	cfg.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
	return kubernetes.NewForConfigOrDie(cfg)
}

// policyMessage is the message of the policy's validation of rule: every message
// starts with "rule <name>:".
func (r renderedDeploy) policyMessage(t *testing.T, rule string) string {
	t.Helper()
	var found []string
	for _, v := range r.policy.Spec.Validations {
		if strings.HasPrefix(v.Message, "rule "+rule+": ") {
			found = append(found, v.Message)
		}
	}
	if len(found) != 1 {
		t.Fatalf("the policy has %d validations of rule %q, want 1", len(found), rule)
	}
	return found[0]
}

// foreignServiceAccountsPolicy is the policy of deploy/ that keeps the controller's
// Deployments off ServiceAccounts it did not make.
const foreignServiceAccountsPolicy = "consul-gateway-controller-foreign-serviceaccounts"

// gatewayClassesPolicy is the policy of deploy/ that lets the controller change a
// GatewayClass's gateway-exists finalizer and nothing else.
const gatewayClassesPolicy = "consul-gateway-controller-gatewayclasses"

// waitParameter waits until the API server's parameter cache holds the ServiceAccount
// d runs as: a dry-run create of d by the controller is refused.
func waitParameter(t *testing.T, controller kubernetes.Interface, d *appsv1.Deployment) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "the ServiceAccount a parameter of "+foreignServiceAccountsPolicy, func(ctx context.Context) error {
		_, err := controller.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if isPolicyDenial(err, foreignServiceAccountsPolicy, "rule foreign-serviceaccount: ") {
			return nil
		}
		if err == nil {
			return fmt.Errorf("a dry-run create of Deployment %s was admitted, want refused", d.Name)
		}
		return fmt.Errorf("a dry-run create of Deployment %s: %w, want refused", d.Name, err)
	})
}

// isPolicyDenial reports whether err is the refusal of the named policy with message.
func isPolicyDenial(err error, policy, message string) bool {
	return apierrors.IsForbidden(err) &&
		strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policy+"'") &&
		strings.Contains(err.Error(), message)
}

// installPolicy creates (or updates) the policy and binding deploy/ renders, as the
// admin, and waits until they are in effect.
func installPolicy(t *testing.T, r renderedDeploy) {
	t.Helper()
	ctx, admission := t.Context(), env.KubeClient.AdmissionregistrationV1()
	policy, binding := r.policy.DeepCopy(), r.binding.DeepCopy()
	policy.Namespace, binding.Namespace = "", "" // cluster-scoped; kustomize sets one anyway
	_, err := admission.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = updateSpec(ctx, admission.ValidatingAdmissionPolicies().Get, admission.ValidatingAdmissionPolicies().Update, policy.Name,
			func(p *admissionregistrationv1.ValidatingAdmissionPolicy) { p.Spec = policy.Spec })
	}
	if err != nil {
		t.Fatalf("install the ValidatingAdmissionPolicy: %v", err)
	}
	_, err = admission.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = updateSpec(ctx, admission.ValidatingAdmissionPolicyBindings().Get, admission.ValidatingAdmissionPolicyBindings().Update, binding.Name,
			func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) { b.Spec = binding.Spec })
	}
	if err != nil {
		t.Fatalf("install the ValidatingAdmissionPolicyBinding: %v", err)
	}
	waitPolicyInEffect(t, r, nil)
}

func updateSpec[T any](ctx context.Context, get func(context.Context, string, metav1.GetOptions) (T, error),
	update func(context.Context, T, metav1.UpdateOptions) (T, error), name string, edit func(T)) error {
	obj, err := get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	edit(obj)
	_, err = update(ctx, obj, metav1.UpdateOptions{})
	return err
}

// waitPolicyInEffect waits until the API server enforces the policy on client's
// requests: a policy takes a moment to load after it is written. The probe is a dry
// run, so nothing is created while it is not yet in effect. A nil client probes as
// the admin impersonating a ServiceAccount of the controller's name in group
// system:masters, which RBAC lets reach admission whatever the grants.
func waitPolicyInEffect(t *testing.T, r renderedDeploy, client kubernetes.Interface) {
	t.Helper()
	if client == nil {
		cfg := rest.CopyConfig(env.Kube.Config(testenv.AdminUser))
		cfg.Impersonate = rest.ImpersonationConfig{UserName: serviceaccountUser("policy-probe", deployName),
			Groups: []string{"system:masters", "system:authenticated"}}
		cfg.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter() // as tokenClient's
		client = kubernetes.NewForConfigOrDie(cfg)
	}
	want := r.policyMessage(t, "namespace")
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "policy-probe"}}
	start := time.Now()
	testenv.Eventually(t, 30*time.Second, "the ValidatingAdmissionPolicy in effect", func(ctx context.Context) error {
		_, err := client.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, sa, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case err == nil:
			return errors.New("an unlabelled ServiceAccount in kube-system was admitted")
		case !isPolicyDenial(err, r.policy.Name, want):
			return err
		}
		return nil
	})
	t.Logf("the policy refuses the controller's ServiceAccount after %s", time.Since(start).Round(time.Millisecond))
}

// policyDenials is the API server's count of the policy's refusals, one per rule
// that failed in a refused request. It also serves
// cleanups, which run after t's context ends.
func policyDenials(t *testing.T, policy string) float64 {
	t.Helper()
	text, err := env.KubeClient.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("the API server's metrics: %v", err)
	}
	return testenv.MetricSum(string(text), "apiserver_validating_admission_policy_check_total",
		`policy="`+policy+`"`, `enforcement_action="deny"`)
}
