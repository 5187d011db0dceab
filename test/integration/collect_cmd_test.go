package integration

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/cache"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/identity"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// TestCollectBundle runs collect against a controller's objects and entries on a
// Consul with ACLs, with Consul's management token (which reads every token's secret)
// and the API server's admin: the bundle holds the objects with their status, the
// Events, the logs of the controller's and the gateway's pods (read through the API
// server; these pods have no node, so their logs are empty and their /metrics is
// recorded as refused), the entries, the gateway's catalog instances, its ACL identity
// and the versions, and no file holds the listener's private key, Consul's
// management token, the gateway identity's token secret or the API server token.
func TestCollectBundle(t *testing.T) {
	agent, admin, rules := aclConsul(t)
	writer := testenv.ACLToken(t, admin, "collect-writer", rules)
	s := newConsulStack(t, "collect-"+utilrand.String(5))
	_, key := s.secureGateway(t)
	env.Create(t, s.Route("web", "web.example.com"))
	clusterID := "collect-" + utilrand.String(5)
	startController(t, s.Controller, controllerOptions{consul: &consulOptions{agent: agent, token: writer, clusterID: clusterID,
		translation: translate.Options{ManageServiceDefaults: true}}})
	waitRouteConsulAccepted(t, s, "web")
	certificate := s.naming.CertificateName(s.Namespace, "tls")
	testenv.Eventually(t, 30*time.Second, "the listener's certificate is in Consul", func(context.Context) error {
		_, _, err := admin.ConfigEntries().Get(consulapi.InlineCertificate, certificate, nil)
		return err
	})

	// The gateway's ACL identity, as the controller names it, with a token of its role.
	namer := identity.Namer{Ownership: translate.Ownership{Controller: string(s.Controller), ClusterID: clusterID}}
	gw := cache.ObjectName{Namespace: s.Namespace, Name: "secure"}
	policy, _, err := admin.ACL().PolicyCreate(&consulapi.ACLPolicy{Name: namer.Name(gw), Description: namer.Description(gw), Rules: `service "x" { policy = "read" }`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	role, _, err := admin.ACL().RoleCreate(&consulapi.ACLRole{Name: namer.Name(gw), Description: namer.Description(gw), Policies: []*consulapi.ACLRolePolicyLink{{ID: policy.ID}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	gatewayToken, _, err := admin.ACL().TokenCreate(&consulapi.ACLToken{Description: "a gateway pod's login", Roles: []*consulapi.ACLTokenRoleLink{{ID: role.ID}}}, nil)
	if err != nil {
		t.Fatal(err)
	}

	// Intentions of others: one lets the gateway reach a backend (the controller adds
	// its gateways as sources to such entries), one does not name it.
	entryName := s.naming.EntryName(s.Namespace, "secure")
	for dest, source := range map[string]string{"collect-backend-" + s.Namespace: entryName, "collect-other-" + s.Namespace: "someone-else"} {
		if _, _, err := admin.ConfigEntries().Set(&consulapi.ServiceIntentionsConfigEntry{Kind: consulapi.ServiceIntentions, Name: dest,
			Sources: []*consulapi.SourceIntention{{Name: source, Action: consulapi.IntentionActionAllow}}}, nil); err != nil {
			t.Fatal(err)
		}
	}

	// The controller's replicas and the gateway's pod.
	controllerNS := env.NewNamespace(t, "collect-controller")
	selector := "app.kubernetes.io/name=collect-" + utilrand.String(5)
	label, value, _ := strings.Cut(selector, "=")
	metricsPort := corev1.ContainerPort{Name: "metrics", ContainerPort: 8080}
	for _, name := range []string{"controller-a", "controller-b"} {
		env.Create(t, testenv.UnscheduledPod(controllerNS, name, map[string]string{label: value}, "controller", metricsPort))
	}
	env.Create(t, testenv.UnscheduledPod(s.Namespace, "secure-gateway-0", map[string]string{dataplane.GatewayNameLabel: "secure", dataplane.ManagedByLabel: dataplane.ManagedByValue}, "consul-dataplane"))

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := env.Kube.WriteKubeconfig(kubeconfig, testenv.AdminUser); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(agent.ManagementToken()), 0o600); err != nil {
		t.Fatal(err)
	}
	bundleFile := filepath.Join(dir, "bundle.tar.gz")
	flags := []string{"--kubeconfig=" + kubeconfig, "--consul-http-addr=" + agent.HTTPAddr(), "--consul-token-file=" + tokenFile,
		"--controller-name=" + string(s.Controller), "--cluster-id=" + clusterID, "-n", s.Namespace,
		"--controller-namespace=" + controllerNS, "--controller-selector=" + selector}
	run := testenv.RunCommand(t, append([]string{"collect", "--out", bundleFile}, flags...)...)
	if run.Code != 0 {
		t.Fatalf("collect: exit %d\n%s%s", run.Code, run.Stdout, run.Stderr)
	}
	files := testenv.ReadTarGz(t, bundleFile)
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range files {
			if !yield(name) {
				return
			}
		}
	})
	t.Logf("the bundle: %s\n%s\nerrors.txt:\n%s", run.Stderr, strings.Join(names, "\n"), files["errors.txt"])

	for name, wants := range map[string][]string{
		"status.yaml":                                                    {"name: secure", "name: web", entryName},
		"versions.yaml":                                                  {"kubernetes: v1.37", "consul: 1.15.4", "registry.invalid/controller:test"},
		"kubernetes/gatewayclasses.yaml":                                 {"name: " + s.Class},
		"kubernetes/gateways.yaml":                                       {"name: secure", "name: edge", "conditions:"},
		"kubernetes/httproutes.yaml":                                     {"name: web", "parents:"},
		"kubernetes/events/" + s.Namespace + ".yaml":                     nil,
		"kubernetes/events/" + controllerNS + ".yaml":                    nil,
		"logs/" + controllerNS + "/controller-a/controller.log":          nil,
		"logs/" + controllerNS + "/controller-b/controller.log":          nil,
		"logs/" + s.Namespace + "/secure-gateway-0/consul-dataplane.log": nil,
		"consul/entries.json":                                            {`"Kind": "inline-certificate"`, `"PrivateKey": "REDACTED"`, `"Kind": "api-gateway"`, `"Kind": "http-route"`, `"Name": "collect-backend-` + s.Namespace + `"`},
		"consul/gateway-instances.json":                                  nil,
		"consul/acl.json":                                                {namer.Name(gw), gatewayToken.AccessorID},
		"errors.txt":                                                     {"metrics/" + controllerNS + "/controller-a.txt: address not allowed"},
	} {
		content, ok := files[name]
		if !ok {
			t.Errorf("the bundle has no %s", name)
			continue
		}
		for _, want := range wants {
			if !strings.Contains(content, want) {
				t.Errorf("%s does not hold %q:\n%s", name, want, content)
			}
		}
	}

	if strings.Contains(files["consul/entries.json"], "collect-other-") {
		t.Errorf("consul/entries.json holds an intentions entry that does not name the gateway")
	}

	// What the bundle must never hold, in any file.
	keyBody := strings.Split(strings.TrimSpace(string(key)), "\n")[1] // a line of the key's base64
	secrets := map[string]string{
		"the listener's private key": keyBody,
		"Consul's management token":  agent.ManagementToken(),
		"the gateway token's secret": gatewayToken.SecretID,
		"the controller's token":     writer,
		"the API server token":       env.Kube.Config(testenv.AdminUser).BearerToken,
	}
	for name, content := range files {
		for what, secret := range secrets {
			if secret != "" && strings.Contains(content, secret) {
				t.Errorf("%s holds %s", name, what)
			}
		}
	}

	// Consul down: the Kubernetes half is written, and why Consul's is not.
	downFlags := append(slices.Clone(flags), "--consul-http-addr=http://"+testenv.ClosedLoopbackAddr(t))
	downFile := filepath.Join(dir, "consul-down.tar.gz")
	if run := testenv.RunCommand(t, append([]string{"collect", "--out", downFile}, downFlags...)...); run.Code != 0 {
		t.Fatalf("collect with Consul down: exit %d\n%s", run.Code, run.Stderr)
	}
	down := testenv.ReadTarGz(t, downFile)
	if !strings.Contains(down["errors.txt"], "consul: Consul not reached: ") || !strings.Contains(down["status.yaml"], "consulError: ") ||
		!strings.Contains(down["kubernetes/gateways.yaml"], "name: secure") {
		t.Errorf("collect with Consul down: errors.txt, status.yaml or gateways.yaml lacks what it should say:\n%s\n%s", down["errors.txt"], down["status.yaml"])
	}

	// A directory is the same bundle.
	out := filepath.Join(dir, "bundle")
	if run := testenv.RunCommand(t, append([]string{"collect", "--out", out}, flags...)...); run.Code != 0 {
		t.Fatalf("collect --out DIR: exit %d\n%s", run.Code, run.Stderr)
	}
	for _, name := range names {
		if _, err := os.Stat(filepath.Join(out, filepath.FromSlash(name))); err != nil {
			t.Errorf("the directory bundle: %v", err)
		}
	}
}
