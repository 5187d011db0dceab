package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/options"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// grant is one verb on one resource of one rule of the ClusterRole or the Role.
type grant struct {
	role     string // "ClusterRole" or "Role"
	rule     int
	verb     string
	resource string // with its subresource, as the authorizer names it
	group    string
}

func (g grant) String() string {
	return fmt.Sprintf("%s rule %d: %s %s", g.role, g.rule, g.verb, strings.TrimPrefix(g.resource+"."+g.group, "."))
}

// grants splits every rule into single grants.
func grants(role string, rules []rbacv1.PolicyRule) []grant {
	var out []grant
	for i, rule := range rules {
		for _, group := range rule.APIGroups {
			for _, resource := range rule.Resources {
				for _, verb := range rule.Verbs {
					out = append(out, grant{role: role, rule: i, verb: verb, resource: resource, group: group})
				}
			}
		}
	}
	return out
}

// without returns rules with the one grant g removed; the rest of g's rule stays, split
// into a rule for the other resources and one for the other verbs of g's resource.
func without(rules []rbacv1.PolicyRule, role string, g *grant) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for i, rule := range rules {
		if g == nil || g.role != role || g.rule != i {
			out = append(out, *rule.DeepCopy())
			continue
		}
		if len(rule.APIGroups) != 1 {
			panic("a rule with several apiGroups: split it in deploy/ so each grant can be tested")
		}
		others := slices.DeleteFunc(slices.Clone(rule.Resources), func(r string) bool { return r == g.resource })
		if len(others) > 0 {
			r := *rule.DeepCopy()
			r.Resources = others
			out = append(out, r)
		}
		verbs := slices.DeleteFunc(slices.Clone(rule.Verbs), func(v string) bool { return v == g.verb })
		if len(verbs) > 0 {
			r := *rule.DeepCopy()
			r.Resources, r.Verbs = []string{g.resource}, verbs
			out = append(out, r)
		}
	}
	return out
}

// rbacCase runs the controller with the deploy/ roles minus one grant (nil: the full
// roles, which must show no refusal).
type rbacCase struct {
	name      string
	removed   *grant
	watchList bool // false: through startWatchListOffProxy
	// scraper is a token allowed to get /metrics: a scraper polls the case's
	// controller with it, so the grants of /metrics' reviews are put to the test.
	scraper string
}

// TestDeployRBACIsLeastPrivilege removes each grant of the ClusterRole and the Role
// that deploy/ renders, one per case, and runs the controller binary with what is left
// against an example that provokes every grant, while a scraper bound to deploy/'s
// metrics-reader ClusterRole polls its /metrics: each removal must show as a refusal
// of exactly that grant within a bounded time, and the full roles must show none and
// serve the scraper. A grant whose removal shows nothing is a grant the controller
// does not need. deploy/'s ValidatingAdmissionPolicy, which narrows the workload
// grants, is in effect for every case (each runs as a ServiceAccount of the
// controller's name): the full roles converging with no refusal shows that it takes
// nothing the controller needs.
func TestDeployRBACIsLeastPrivilege(t *testing.T) {
	start := time.Now()
	r := renderDeploy(t)
	checkLeaseRule(t, r.role)
	ensureNamespace(t, r.role.Namespace)
	installPolicy(t, r)
	scraperName := "rbac-metrics-" + utilrand.String(4)
	scraper := metricsScraper(t, r.role.Namespace, scraperName, metricsReaderRole(t, r, scraperName))

	cases := []rbacCase{
		{name: "full roles", watchList: true, scraper: scraper},
		{name: "full roles, API server without WatchList", watchList: false, scraper: scraper},
	}
	for _, g := range append(grants("ClusterRole", r.clusterRole.Rules), grants("Role", r.role.Rules)...) {
		// Informers list only where the API server lacks WatchList (see
		// startWatchListOffProxy); there, and only there, is a list grant needed.
		cases = append(cases, rbacCase{name: "without " + g.String(), removed: &g, watchList: g.verb != "list", scraper: scraper})
	}
	denied := policyDenials(t, r.policy.Name)
	t.Cleanup(func() {
		t.Logf("%d cases, wall time %s", len(cases), time.Since(start).Round(time.Millisecond))
		// A removed grant makes a write fail in RBAC, never turns it into one the
		// policy refuses; the log checks see a refusal only where they look.
		if denied = policyDenials(t, r.policy.Name) - denied; denied != 0 {
			t.Errorf("the ValidatingAdmissionPolicy refused requests of the cases' controllers (%v failed rules)", denied)
		}
	})
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runRBACCase(t, r, c, fmt.Sprintf("rbac-%s-%d", utilrand.String(4), i))
		})
	}
}

// checkLeaseRule checks that every rule of the Role but the one for create names
// exactly the Lease the controller uses by default; the cases rename it to their own
// Lease. A rule without resourceNames would grant its verbs on every Lease of the
// namespace, and the cases would not notice. Create alone cannot be limited by name.
func checkLeaseRule(t *testing.T, role rbacv1.Role) {
	t.Helper()
	want := options.New(options.Defaults{}).Leader
	if role.Namespace != want.Namespace {
		t.Errorf("Role in namespace %q; the controller's Lease is in %q", role.Namespace, want.Namespace)
	}
	for _, rule := range role.Rules {
		if slices.Equal(rule.Verbs, []string{"create"}) {
			continue
		}
		if !slices.Equal(rule.ResourceNames, []string{want.Name}) {
			t.Errorf("Role rule %v names %v; it must name only the controller's Lease %q", rule.Verbs, rule.ResourceNames, want.Name)
		}
	}
}

func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	_, err := env.KubeClient.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// runRBACCase gives a fresh ServiceAccount copies of the roles without c.removed (the
// Role's Lease renamed to the case's own), creates the example for a fresh
// GatewayClass, and runs the controller with the ServiceAccount's token. The
// ServiceAccount has the controller's name, so the policy holds it to its rules, in a
// namespace of its own, as the controller's is (the policy refuses writes there).
func runRBACCase(t *testing.T, r renderedDeploy, c rbacCase, id string) {
	ctx := t.Context()
	controller := gatewayv1.GatewayController("example.com/" + id)
	x := newDeployExample(id, id)
	env.Create(t, testenv.GatewayClass(id, controller))
	x.create(t)

	core, rbac := env.KubeClient.CoreV1(), env.KubeClient.RbacV1()
	saNamespace := id + "-controller"
	ensureNamespace(t, saNamespace)
	if _, err := core.ServiceAccounts(saNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: deployName}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: deployName, Namespace: saNamespace}}
	clusterRules := without(r.clusterRole.Rules, "ClusterRole", c.removed)
	roleRules := without(r.role.Rules, "Role", c.removed)
	for i := range roleRules {
		if len(roleRules[i].ResourceNames) > 0 {
			roleRules[i].ResourceNames = []string{id} // the case's Lease (checkLeaseRule)
		}
	}
	create := func(what string, err error) {
		if err != nil {
			t.Fatalf("create %s: %v", what, err)
		}
	}
	meta := metav1.ObjectMeta{Name: id}
	_, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: meta, Rules: clusterRules}, metav1.CreateOptions{})
	create("ClusterRole", err)
	_, err = rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: meta, Subjects: subjects,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: id}}, metav1.CreateOptions{})
	create("ClusterRoleBinding", err)
	leaseNS := r.role.Namespace
	_, err = rbac.Roles(leaseNS).Create(ctx, &rbacv1.Role{ObjectMeta: meta, Rules: roleRules}, metav1.CreateOptions{})
	create("Role", err)
	_, err = rbac.RoleBindings(leaseNS).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta, Subjects: subjects,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: id}}, metav1.CreateOptions{})
	create("RoleBinding", err)
	t.Cleanup(func() {
		ctx, del := t.Context(), metav1.DeleteOptions{}
		_ = rbac.ClusterRoleBindings().Delete(ctx, id, del)
		_ = rbac.ClusterRoles().Delete(ctx, id, del)
		_ = rbac.RoleBindings(leaseNS).Delete(ctx, id, del)
		_ = rbac.Roles(leaseNS).Delete(ctx, id, del)
		_ = env.KubeClient.CoordinationV1().Leases(leaseNS).Delete(ctx, id, del)
	})
	user := serviceaccountUser(saNamespace, deployName)
	waitAuthorized(t, user, clusterRules[0], "")
	waitAuthorized(t, user, roleRules[0], leaseNS)

	var proxy *watchListOffProxy
	if !c.watchList {
		proxy = startWatchListOffProxy(t)
	}
	args := r.processArgs(t, id,
		"--controller-name="+string(controller),
		"--cluster-id="+id,
		"--manage-service-defaults",
		"--leader-elect-resource-namespace="+leaseNS,
		"--leader-elect-resource-name="+id,
	)
	kubeconfig, _ := serviceAccountKubeconfig(t, saNamespace, deployName, proxy)
	p := env.RunController(t, testenv.ControllerOptions{Name: id, Kubeconfig: kubeconfig, Args: args, MetricsToken: c.scraper})
	go scrapeUntilDone(t.Context(), p)
	started := time.Now()
	if c.removed == nil {
		waitConverged(t, p, x, controller, 90*time.Second)
		t.Logf("converged in %s with no refusal", time.Since(started).Round(time.Millisecond))
		testenv.Eventually(t, 10*time.Second, "the scraper is served /metrics", func(ctx context.Context) error {
			_, err := p.Metrics(ctx)
			return err
		})
		assertNoRefusal(t, p)
		if proxy != nil && (proxy.refused.Load() == 0 || proxy.lists.Load() == 0) {
			t.Errorf("through the proxy: %d watch-lists refused, %d lists: the informers did not take the LIST path", proxy.refused.Load(), proxy.lists.Load())
		}
		return
	}
	outcome := awaitDegradation(t, p, *c.removed, 45*time.Second)
	t.Logf("%s: %s after %s", c.removed, outcome, time.Since(started).Round(time.Millisecond))
	_ = p.Kill() // decided: free the CPU for the other cases
}

// scrapeUntilDone scrapes p's /metrics every half second, as Prometheus would, until
// ctx is done: each scrape makes p review the scraper's token and access (once per
// cache time), which its RBAC must allow.
func scrapeUntilDone(ctx context.Context, p *testenv.Controller) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		_, _ = p.Metrics(ctx) // what it answers shows in p's log
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func serviceaccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// waitAuthorized waits until the API server's RBAC cache allows user the first grant
// of rule, so the controller does not race the bindings just created.
func waitAuthorized(t *testing.T, user string, rule rbacv1.PolicyRule, namespace string) {
	t.Helper()
	attrs := &authorizationv1.ResourceAttributes{Namespace: namespace, Group: rule.APIGroups[0], Verb: rule.Verbs[0]}
	attrs.Resource, attrs.Subresource, _ = strings.Cut(rule.Resources[0], "/")
	if len(rule.ResourceNames) > 0 {
		attrs.Name = rule.ResourceNames[0]
	}
	testenv.Eventually(t, 10*time.Second, "RBAC allows "+user+" to "+attrs.Verb+" "+rule.Resources[0], func(context.Context) error {
		sar, err := env.KubeClient.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: attrs},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if !sar.Status.Allowed {
			return fmt.Errorf("not allowed: %s", sar.Status.Reason)
		}
		return nil
	})
}

// awaitDegradation waits until the controller visibly suffers the removal of g: its
// log shows the API server refusing it exactly g. It fails the test on anything else:
// a refusal of another grant, an exit (with any code) without that refusal, or nothing
// within timeout. An exit is only the removal's effect when the refusal is logged.
func awaitDegradation(t *testing.T, p *testenv.Controller, g grant, timeout time.Duration) string {
	t.Helper()
	want := refusal{g.verb, g.resource, g.group}
	deadline := time.Now().Add(timeout)
	for {
		// Once exited, the log read after is complete.
		exited := !p.Running()
		log := p.Output()
		found, _ := refusals(log)
		if slices.Contains(found, want) {
			return "refused " + want.String() + " in: " + refusalLine(log, want)
		}
		if len(found) > 0 {
			t.Fatalf("%s: refused %v, not the removed grant\n--- log tail ---\n%s", g, found, testenv.Tail(log, 30))
		}
		if exited {
			code, _ := p.Wait(time.Second)
			t.Fatalf("%s: the controller exited with code %d and no refusal of the removed grant\n--- log tail ---\n%s", g, code, testenv.Tail(log, 30))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no visible degradation within %s (no refusal, still running): the grant looks unneeded, or the example does not provoke it\n--- log tail ---\n%s",
				g, timeout, testenv.Tail(log, 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
