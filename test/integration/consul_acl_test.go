package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"maps"
	"os"
	"strings"
	gosync "sync"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/catalog"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// aclConsul starts a Consul agent of its own with ACLs on (default deny) for the test,
// and returns it, a management client, and the documented policy of deploy/.
func aclConsul(t *testing.T) (*testenv.ConsulAgent, *consulapi.Client, string) {
	t.Helper()
	agent, admin := testenv.StartConsulFor(t, env.LogDir(), testenv.ConsulOptions{ACL: true})
	rules, err := testenv.DeployPolicies("consul-acl-policy.hcl")
	if err != nil {
		t.Fatal(err)
	}
	return agent, admin, rules
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu  gosync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// verboseLogs sends klog's output, at -v=10, to the returned buffer until the test ends.
func verboseLogs(t *testing.T) *syncBuffer {
	t.Helper()
	var fs flag.FlagSet
	klog.InitFlags(&fs)
	out := &syncBuffer{}
	for name, value := range map[string]string{"v": "10", "logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL"} {
		if err := fs.Set(name, value); err != nil {
			t.Fatal(err)
		}
	}
	klog.SetOutput(out)
	t.Cleanup(func() {
		_ = fs.Set("v", "0")
		_ = fs.Set("logtostderr", "true")
		klog.SetOutput(os.Stderr)
	})
	return out
}

// TestConsulACLs runs the syncer against a Consul with ACLs on (default deny): the
// policy in deploy/ is enough; a token without mesh:write gets a clear condition; and
// at -v=10 neither token nor private key reaches the log.
func TestConsulACLs(t *testing.T) {
	agent, admin, rules := aclConsul(t)
	goodToken := testenv.ACLToken(t, admin, "documented", rules)
	readOnlyToken := testenv.ACLToken(t, admin, "read-only", `mesh = "read"
agent_prefix "" { policy = "read" }`)

	s := newConsulStack(t, "cs-acl")
	_, key := s.secureGateway(t)
	env.Create(t, s.Route("web"))

	// Every log line at -v=10 is captured from before either token is used, so the
	// refused writes' logging is covered too.
	logs := verboseLogs(t)

	// A token without mesh:write: every write is refused and the Gateway says why.
	denied := startController(t, s.Controller, controllerOptions{consul: &consulOptions{agent: agent, token: readOnlyToken, clusterID: "acl"}})
	testenv.Eventually(t, 30*time.Second, "the refused write is reported on the Gateway", func(context.Context) error {
		g, err := env.GatewayClient.GatewayV1().Gateways(s.Namespace).Get(t.Context(), "edge", metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(g.Status.Conditions, "Programmed")
		if c == nil || c.Reason != consul.ReasonWriteFailed || !strings.Contains(c.Message, "Permission denied") {
			return fmt.Errorf("Programmed = %+v", c)
		}
		return nil
	})
	denied.stop()

	// The documented policy is enough.
	rc := startController(t, s.Controller, controllerOptions{consul: &consulOptions{agent: agent, token: goodToken, clusterID: "acl"}})
	gwName := s.naming.EntryName(s.Namespace, "secure")
	testenv.Eventually(t, 30*time.Second, "entries written with the documented policy", func(context.Context) error {
		for _, k := range []struct{ kind, name string }{
			{consulapi.APIGateway, gwName},
			{consulapi.InlineCertificate, s.naming.CertificateName(s.Namespace, "tls")},
			{consulapi.HTTPRoute, s.naming.EntryName(s.Namespace, "web")},
		} {
			if _, _, err := admin.ConfigEntries().Get(k.kind, k.name, nil); err != nil {
				return fmt.Errorf("%s %s: %w", k.kind, k.name, err)
			}
		}
		if got := s.gatewayCondition(t, "secure", "Programmed"); got != "True/Programmed" {
			return fmt.Errorf("Gateway secure Programmed = %q", got)
		}
		return nil
	})
	if n := rc.consulWrites.count(403); n != 0 {
		t.Errorf("%d writes were refused with the documented policy", n)
	}
	rc.stop()

	out := logs.String()
	if len(out) < 10000 {
		t.Fatalf("only %d bytes of logs at -v=10: the capture did not work", len(out))
	}
	assertNoSecrets(t, out, key, map[string]string{
		"the Consul token":           goodToken,
		"the Kubernetes token":       env.Kube.Token(testenv.AdminUser),
		"the read-only Consul token": readOnlyToken,
	})
}

// assertNoSecrets fails t for each of tokens, and each form of the PEM private key
// key, that appears in a -v=10 log.
func assertNoSecrets(t *testing.T, log string, key []byte, tokens map[string]string) {
	t.Helper()
	keyBody := strings.TrimSpace(strings.Join(strings.Split(string(key), "\n")[1:3], ""))
	secrets := map[string]string{
		"the private key (PEM)":        keyBody[:40],
		"the private key (base64)":     base64.StdEncoding.EncodeToString(key)[:40],
		"a PEM private key header":     "PRIVATE KEY",
		"the private key, JSON-quoted": strings.ReplaceAll(string(key[:60]), "\n", `\n`),
	}
	maps.Copy(secrets, tokens)
	for what, secret := range secrets {
		if strings.Contains(log, secret) {
			t.Errorf("%s appears in the -v=10 log", what)
		}
	}
}

// TestRegistrationACLs registers a gateway pod against a Consul with ACLs on: the
// policy in deploy/ is enough, and without its node and service write grants the
// registration is refused (each grant is needed).
func TestRegistrationACLs(t *testing.T) {
	agent, admin, documented := aclConsul(t)
	withoutNodeWrite := strings.Replace(documented, "node_prefix \"gateway-\" {\n  policy = \"write\"\n}", "", 1)
	withoutServiceWrite := strings.Replace(documented, "service_prefix \"\" {\n  policy     = \"write\"\n", "service_prefix \"\" {\n  policy     = \"read\"\n", 1)
	if withoutNodeWrite == documented || withoutServiceWrite == documented {
		t.Fatal("the policy no longer has the node_prefix and service_prefix write rules this test removes")
	}
	gw := &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "acl-apps", Name: "edge", UID: "uid-edge", Generation: 1},
		Status: gatewayv1.GatewayStatus{Conditions: []metav1.Condition{{
			Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 1,
		}}},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "acl-apps", Name: "edge-pod", Labels: map[string]string{"gateway": "edge"}},
		Spec:       corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.9.9", HostIP: "10.1.0.9",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := pods.Add(pod); err != nil {
		t.Fatal(err)
	}
	naming := translate.Naming{}
	service := naming.EntryName(gw.Namespace, gw.Name)
	nodeName := func(node string) string { return dataplane.SyntheticNode("", node) }
	register := func(t *testing.T, rules string) error {
		t.Helper()
		client, err := agent.ClientWithToken(testenv.ACLToken(t, admin, "registration-"+t.Name()[len("TestRegistrationACLs/"):], rules))
		if err != nil {
			t.Fatal(err)
		}
		r := catalog.NewRegistrar(catalog.Config{
			Client: client, Naming: naming, Ownership: translate.Ownership{Controller: "example.com/acl", ClusterID: "acl"},
			Pods: corelisters.NewPodLister(pods), PodsSynced: func() bool { return true },
			GatewayPods: func(cache.ObjectName) labels.Selector {
				return labels.SelectorFromSet(map[string]string{"gateway": "edge"})
			},
			OwnsPod:    func(*gatewayv1.Gateway, *corev1.Pod) bool { return true },
			InstanceID: func(pod *corev1.Pod) string { return pod.Name },
			NodeName:   nodeName,
			Workers:    1,
		})
		r.Publish(t.Context(), contract.Confirmation{Kind: "Gateway", Key: cache.MetaObjectToName(gw), Object: gw})
		return r.SyncOnce(t.Context(), cache.MetaObjectToName(gw))
	}

	t.Run("documented", func(t *testing.T) {
		if err := register(t, documented); err != nil {
			t.Fatalf("registration with the documented policy: %v", err)
		}
		entries, _, err := admin.Health().Service(service, "", true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 || entries[0].Service.ID != "edge-pod" || entries[0].Node.Node != "gateway-node-1" {
			t.Fatalf("passing instances %v, want edge-pod on gateway-node-1", entries)
		}
		if _, err := admin.Catalog().Deregister(&consulapi.CatalogDeregistration{Node: "gateway-node-1"}, nil); err != nil {
			t.Fatal(err)
		}
	})
	// The node rule is scoped: a node outside the synthetic prefix cannot be written.
	t.Run("node outside the prefix", func(t *testing.T) {
		nodeName = func(node string) string { return node + "-virtual" }
		defer func() { nodeName = func(node string) string { return dataplane.SyntheticNode("", node) } }()
		if err := register(t, documented); err == nil || !strings.Contains(err.Error(), "Permission denied") {
			t.Fatalf("registration on node-1-virtual: %v, want Permission denied", err)
		}
	})
	for name, rules := range map[string]string{"without node write": withoutNodeWrite, "without service write": withoutServiceWrite} {
		t.Run(name, func(t *testing.T) {
			err := register(t, rules)
			if err == nil || !strings.Contains(err.Error(), "Permission denied") {
				t.Fatalf("registration %s: %v, want Permission denied", name, err)
			}
		})
	}
}
