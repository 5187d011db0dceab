package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/cli"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// TestStatusCommandReadsOnly runs the binary's status and explain commands with a ServiceAccount
// that may only list, and a Consul token with mesh:read only, against the
// objects and entries of a running controller: it lists every object of the
// controller with its conditions and Consul's verdict on its entries, and flags the
// entry Consul refused while the route's status still says accepted. It writes
// nothing: the objects' resourceVersions and Consul's index stay as they were.
func TestStatusCommandReadsOnly(t *testing.T) {
	agent, admin, rules := aclConsul(t)
	writer := testenv.ACLToken(t, admin, "status-writer", rules)
	reader := testenv.ACLToken(t, admin, "status-reader", `mesh = "read"
service_prefix "" { policy = "read" }
node_prefix "" { policy = "read" }`)
	s := newConsulStack(t, "status-"+utilrand.String(5))
	env.Create(t, s.Route("web", "web.example.com"))
	clusterID := "status-" + utilrand.String(5)
	rc := startController(t, s.Controller, controllerOptions{consul: &consulOptions{agent: agent, token: writer, clusterID: clusterID,
		translation: translate.Options{ManageServiceDefaults: true}}})
	testenv.Eventually(t, 30*time.Second, "Consul accepted the Gateway and the route", func(ctx context.Context) error {
		g, err := env.GatewayClient.GatewayV1().Gateways(s.Namespace).Get(ctx, s.GatewayName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(g.Status.Conditions, "Programmed") {
			return fmt.Errorf("Gateway conditions %+v", g.Status.Conditions)
		}
		r, err := env.GatewayClient.GatewayV1().HTTPRoutes(s.Namespace).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, p := range r.Status.Parents {
			if p.ControllerName == s.Controller && meta.IsStatusConditionTrue(p.Conditions, gwsync.ConsulAcceptedCondition) {
				return nil
			}
		}
		return fmt.Errorf("route parents %+v", r.Status.Parents)
	})
	rc.stop()

	// Disagreements, made while the controller that would mend them is stopped: the
	// Gateway's api-gateway entry goes from Consul, which then judges the route anew.
	routeEntry := s.naming.EntryName(s.Namespace, "web")
	removeGatewayEntry(t, admin, routeEntry)

	kubeconfig := readOnlyKubeconfig(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(reader), 0o600); err != nil {
		t.Fatal(err)
	}
	// The servers' versions of everything the commands could write: the objects'
	// resourceVersions (the GatewayClass's included) and every config entry's
	// ModifyIndex.
	versions := func() testenv.Versions {
		t.Helper()
		kube, err := env.GatewayAPIVersions(t.Context(), s.Namespace, s.Class)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := testenv.ConsulEntryVersions(t.Context(), admin, nil)
		if err != nil {
			t.Fatal(err)
		}
		return kube.Merge(entries)
	}
	before := versions()
	runWith := func(kubeconfig, tokenFile string) func(command string, args ...string) string {
		return func(command string, args ...string) string {
			t.Helper()
			cmd := exec.Command(testenv.ControllerBinary(t), append([]string{command, "--kubeconfig=" + kubeconfig,
				"--consul-http-addr=" + agent.HTTPAddr(), "--consul-token-file=" + tokenFile,
				"--controller-name=" + string(s.Controller), "--cluster-id=" + clusterID}, args...)...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s %v: %v\n%s", command, args, err, stderr.String())
			}
			return stdout.String()
		}
	}
	run := runWith(kubeconfig, tokenFile)
	var rep cli.StatusReport
	if err := json.Unmarshal([]byte(run("status", "-n", s.Namespace, "-o", "json")), &rep); err != nil {
		t.Fatal(err)
	}
	kinds := map[gatewayv1.Kind][]string{}
	for _, o := range rep.Objects {
		kinds[o.Kind] = append(kinds[o.Kind], o.Name)
	}
	if want := map[gatewayv1.Kind][]string{"GatewayClass": {s.Class}, "Gateway": {s.GatewayName}, "HTTPRoute": {"web"}}; !maps.EqualFunc(want, kinds, slices.Equal[[]string]) {
		t.Errorf("status lists %v, want %v", kinds, want)
	}
	i := slices.IndexFunc(rep.Objects, func(o cli.ObjectReport) bool { return o.Kind == "HTTPRoute" })
	if i < 0 {
		t.Fatal("no HTTPRoute listed")
	}
	route := rep.Objects[i]
	if len(route.Entries) != 1 || route.Entries[0].Name != routeEntry {
		t.Errorf("the route's entries %+v, want %s", route.Entries, routeEntry)
	}
	if len(route.Disagreements) == 0 {
		t.Errorf("the route's disagreements: none, want Consul's new verdict (%+v) flagged against its status", route.Entries)
	}
	gw := rep.Objects[slices.IndexFunc(rep.Objects, func(o cli.ObjectReport) bool { return o.Kind == "Gateway" })]
	if len(gw.Entries) != 0 || !slices.ContainsFunc(gw.Disagreements, func(d string) bool { return strings.Contains(d, "holds no entry") }) {
		t.Errorf("the Gateway: entries %+v, disagreements %q: want no entry, flagged", gw.Entries, gw.Disagreements)
	}
	table := run("status", "-n", s.Namespace)
	for _, want := range []string{"KIND", "HTTPRoute", "web", routeEntry, "holds no entry"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table does not show %q:\n%s", want, table)
		}
	}
	t.Logf("status:\n%s", table)

	// explain, with the same read-only access: every part of the route in words.
	explained := run("explain", "route", s.Namespace+"/web")
	for _, want := range []string{
		"HTTPRoute " + s.Namespace + "/web",
		"note: pods may not be listed",
		s.GatewayName + ": attached",
		"Consul: accepted",
		"rule 0 (PathPrefix /): served",
		fmt.Sprintf("the Consul service %q, of which Consul has no healthy instance", s.Backend),
		"http-route " + routeEntry,
		"Bound=False on api-gateway",
		"Precedence",
	} {
		if !strings.Contains(explained, want) {
			t.Errorf("explain does not say %q:\n%s", want, explained)
		}
	}
	t.Logf("explain:\n%s", explained)

	if changes := before.Changes(versions()); len(changes) > 0 {
		t.Errorf("while status and explain ran with read-only credentials: %s", strings.Join(changes, "; "))
	}

	// Read-only credentials make a write impossible, not absent: the same commands
	// with admin credentials (the API server's admin, Consul's management token) must
	// write nothing either.
	adminKubeconfig := filepath.Join(t.TempDir(), "admin-kubeconfig")
	if err := env.Kube.WriteKubeconfig(adminKubeconfig, testenv.AdminUser); err != nil {
		t.Fatal(err)
	}
	adminTokenFile := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(adminTokenFile, []byte(agent.ManagementToken()), 0o600); err != nil {
		t.Fatal(err)
	}
	asAdmin := runWith(adminKubeconfig, adminTokenFile)
	asAdmin("status", "-n", s.Namespace, "-o", "json")
	asAdmin("status", "-n", s.Namespace)
	if explained := asAdmin("explain", "route", s.Namespace+"/web"); !strings.Contains(explained, "Consul: accepted") {
		t.Errorf("explain with admin credentials does not say %q:\n%s", "Consul: accepted", explained)
	}
	if changes := before.Changes(versions()); len(changes) > 0 {
		t.Errorf("while status and explain ran with admin credentials: %s", strings.Join(changes, "; "))
	}
}

// removeGatewayEntry deletes the api-gateway entry the http-route name is bound to,
// and waits until Consul has judged the route again.
func removeGatewayEntry(t *testing.T, admin *consulapi.Client, name string) {
	t.Helper()
	entry, _, err := admin.ConfigEntries().Get(consulapi.HTTPRoute, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	route := entry.(*consulapi.HTTPRouteConfigEntry)
	if _, err := admin.ConfigEntries().Delete(consulapi.APIGateway, route.Parents[0].Name, nil); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "Consul judged the route without its gateway", func(context.Context) error {
		e, _, err := admin.ConfigEntries().Get(consulapi.HTTPRoute, name, nil)
		if err != nil {
			return err
		}
		if e.GetModifyIndex() == route.ModifyIndex {
			return fmt.Errorf("not judged again yet")
		}
		return nil
	})
}

// readOnlyKubeconfig is a kubeconfig of a ServiceAccount bound to list on the Gateway
// API kinds, Namespaces and Services, and nothing else: the commands read with list.
func readOnlyKubeconfig(t *testing.T) string {
	t.Helper()
	name := "status-reader-" + utilrand.String(5)
	ns := env.NewNamespace(t, "status-sa")
	env.Create(t, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"*"}, Verbs: []string{"list"}},
			{APIGroups: []string{""}, Resources: []string{"namespaces", "services"}, Verbs: []string{"list"}},
		},
	})
	env.Create(t, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	})
	env.Create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	waitAuthorized(t, serviceaccountUser(ns, name), rbacv1.PolicyRule{APIGroups: []string{gatewayv1.GroupName}, Resources: []string{"httproutes"}, Verbs: []string{"list"}}, "")
	kubeconfig, _ := serviceAccountKubeconfig(t, ns, name, nil)
	return kubeconfig
}
