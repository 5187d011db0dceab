package identity

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/listers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewaylisters "sigs.k8s.io/gateway-api/pkg/client/listers/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/testcerts"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

const testAuthMethod = "gateway-pods"

// unsignedJWT has a JWT's shape ({"alg":"RS256"}, {}, a made-up signature), which is
// all Consul checks of the reviewer token when the method is written.
const unsignedJWT = "eyJhbGciOiJSUzI1NiJ9.e30.c2lnbmF0dXJl"

// countingTransport counts the reads (GETs) sent to Consul.
type countingTransport struct {
	base  http.RoundTripper
	reads atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet {
		c.reads.Add(1)
	}
	return c.base.RoundTrip(r)
}

// fairStack is a real Consul with ACLs on (default deny) and a Kubernetes auth method,
// and a Manager whose Consul reads are counted, holding the identities of gateways
// Gateways (g000, g001, ...), each written once.
type fairStack struct {
	m        *Manager
	admin    *consulapi.Client
	counter  *countingTransport
	gateways []cache.ObjectName
}

func newFairStack(tb testing.TB, gateways int) fairStack {
	tb.Helper()
	agent, admin := testenv.StartConsulFor(tb, tb.TempDir(), testenv.ConsulOptions{ACL: true})
	ca, _, err := testcerts.SelfSigned("kubernetes.example")
	if err != nil {
		tb.Fatal(err)
	}
	// Consul checks the method's configuration, not the API server: nothing logs in.
	method := &consulapi.ACLAuthMethod{Name: testAuthMethod, Type: "kubernetes",
		Config: map[string]any{"Host": "https://127.0.0.1:1", "CACert": string(ca), "ServiceAccountJWT": unsignedJWT}}
	if _, _, err := admin.ACL().AuthMethodCreate(method, nil); err != nil {
		tb.Fatal(err)
	}
	counter := &countingTransport{base: http.DefaultTransport}
	client, err := consulapi.NewClient(&consulapi.Config{Address: agent.HTTPAddr(), Token: agent.ManagementToken(), HttpClient: &http.Client{Transport: counter}})
	if err != nil {
		tb.Fatal(err)
	}
	classes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	serviceAccounts := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := classes.Add(&gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "ours"}}); err != nil {
		tb.Fatal(err)
	}
	m := NewManager(Config{
		Client:  client,
		Namer:   Namer{Ownership: translate.Ownership{Controller: "test.example.com/controller", ClusterID: "fair"}},
		Classes: gatewaylisters.NewGatewayClassLister(classes),
		Configs: listers.New[*v1alpha1.GatewayConfig](cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}), v1alpha1.Resource("gatewayconfigs")),
		Pods: func(gw *gatewayv1.Gateway, _ *v1alpha1.GatewayConfig) (string, string) {
			return gw.Name + "-ours", testAuthMethod
		},
		ServiceAccounts: corelisters.NewServiceAccountLister(serviceAccounts),
		Workers:         1,
	})
	s := fairStack{m: m, admin: admin, counter: counter}
	for i := range gateways {
		gw := acceptedGateway("apps", fmt.Sprintf("g%03d", i))
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: gw.Namespace, Name: gw.Name + "-ours", UID: gw.UID + "-sa",
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(gw, schema.GroupVersionKind{Group: gatewayv1.GroupName, Version: "v1", Kind: "Gateway"})}}}
		if err := serviceAccounts.Add(sa); err != nil {
			tb.Fatal(err)
		}
		key := cache.MetaObjectToName(gw)
		m.Publish(tb.Context(), gwsync.Confirmation{Kind: gatewayapi.GatewayKind, Key: key, Object: gw})
		if err := m.SyncOnce(tb.Context(), key); err != nil {
			tb.Fatalf("identity of %s: %v", key, err)
		}
		s.gateways = append(s.gateways, key)
	}
	s.drain()
	return s
}

func acceptedGateway(namespace, name string) *gatewayv1.Gateway {
	return &gatewayv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(namespace + "-" + name), Generation: 1},
		Spec:       gatewayv1.GatewaySpec{GatewayClassName: "ours"},
		Status: gatewayv1.GatewayStatus{Conditions: []metav1.Condition{
			{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 1},
		}},
	}
}

// drain takes every key off the queue, sorted.
func (s fairStack) drain() []cache.ObjectName {
	var keys []cache.ObjectName
	for s.m.queue.Len() > 0 {
		key, _ := s.m.queue.Get()
		s.m.queue.Done(key)
		keys = append(keys, key)
	}
	slices.SortFunc(keys, func(a, b cache.ObjectName) int { return strings.Compare(a.String(), b.String()) })
	return keys
}

// answer is one answer of the named ACL list, waiting past index (0: at once).
func (s fairStack) answer(tb testing.TB, name string, index uint64) (aclSnapshot, uint64) {
	tb.Helper()
	i := slices.IndexFunc(s.m.lists(), func(l aclList) bool { return l.name == name })
	objects, meta, err := s.m.lists()[i].query((&consulapi.QueryOptions{WaitIndex: index}).WithContext(tb.Context()))
	if err != nil {
		tb.Fatalf("list %s: %v", name, err)
	}
	return s.m.snapshot(objects), meta.LastIndex
}

// editPolicy changes by hand the rules of the policy of the Gateway's identity.
func (s fairStack) editPolicy(tb testing.TB, gateway cache.ObjectName, rules string) {
	tb.Helper()
	policy, _, err := s.admin.ACL().PolicyReadByName(s.m.cfg.Namer.Name(gateway), nil)
	if err != nil || policy == nil {
		tb.Fatalf("policy of %s: %+v, %v", gateway, policy, err)
	}
	policy.Rules = rules
	if _, _, err := s.admin.ACL().PolicyUpdate(policy, nil); err != nil {
		tb.Fatal(err)
	}
}

// TestACLChangeSyncsItsOwnerOnly runs the ACL watch's decision on a real Consul's
// answers: its first answer of each list brings back every Gateway (the resync on
// start); a hand edit of one Gateway's policy then brings back that Gateway only, and
// syncing it reads only its own objects and the lists; a change of an object that is
// not ours brings back only the Gateways with a problem (none here).
func TestACLChangeSyncsItsOwnerOnly(t *testing.T) {
	s := newFairStack(t, 4)
	lists := []string{"policies", "roles", "auth methods", "binding rules"}
	snapshots := map[string]aclSnapshot{}
	var policiesIndex uint64
	for _, name := range lists {
		first, index := s.answer(t, name, 0)
		s.m.enqueueChanged(aclSnapshot{}, first)
		if diff := cmp.Diff(s.gateways, s.drain()); diff != "" {
			t.Errorf("first answer of %s: Gateways synced (-want +got):\n%s", name, diff)
		}
		snapshots[name] = first
		if name == "policies" {
			policiesIndex = index
		}
	}

	edited := s.gateways[2]
	s.editPolicy(t, edited, `service "x" { policy = "write" }`)
	now, _ := s.answer(t, "policies", policiesIndex)
	s.m.enqueueChanged(snapshots["policies"], now)
	synced := s.drain()
	if diff := cmp.Diff([]cache.ObjectName{edited}, synced); diff != "" {
		t.Errorf("after a hand edit of %s's policy, Gateways synced (-want +got):\n%s", edited, diff)
	}
	before := s.counter.reads.Load()
	for _, key := range synced {
		if err := s.m.SyncOnce(t.Context(), key); err != nil {
			t.Fatal(err)
		}
	}
	// The binding rule list, the auth method, the policy, the role.
	if got := s.counter.reads.Load() - before; got != 4 {
		t.Errorf("syncing after one ACL change read Consul %d times, want 4", got)
	}
	policy, _, err := s.admin.ACL().PolicyReadByName(s.m.cfg.Namer.Name(edited), nil)
	if err != nil || policy == nil || policy.Rules == `service "x" { policy = "write" }` {
		t.Errorf("policy of %s after its sync: %+v, %v; want the hand edit put back", edited, policy, err)
	}

	if _, _, err := s.admin.ACL().PolicyCreate(&consulapi.ACLPolicy{Name: "someone-elses", Rules: `node_prefix "" { policy = "read" }`}, nil); err != nil {
		t.Fatal(err)
	}
	later, _ := s.answer(t, "policies", 0)
	s.m.enqueueChanged(now, later)
	if got := s.drain(); len(got) > 1 || (len(got) == 1 && got[0] != edited) {
		t.Errorf("after a foreign policy came, Gateways synced %v; want none but %s, whose own policy changed since", got, edited)
	}
}

// BenchmarkACLChangeSyncs counts, on a real Consul, the identity syncs and Consul
// reads one hand edit of one Gateway's policy costs, with 10 and with 200 Gateways:
// "before" syncs every Gateway known, as the watch did on any change of a list;
// "after" is the watch's decision now. Both are measured in the same run.
func BenchmarkACLChangeSyncs(b *testing.B) {
	for _, gateways := range []int{10, 200} {
		s := newFairStack(b, gateways)
		last, index := s.answer(b, "policies", 0)
		s.m.enqueueChanged(aclSnapshot{}, last)
		s.drain()
		for _, mode := range []string{"before", "after"} {
			b.Run(fmt.Sprintf("gateways=%d/%s", gateways, mode), func(b *testing.B) {
				var syncs, reads int64
				for i := range b.N {
					s.editPolicy(b, s.gateways[i%gateways], fmt.Sprintf(`service "edit-%d" { policy = "read" }`, i))
					now, next := s.answer(b, "policies", index)
					if mode == "before" {
						for _, k := range s.m.gateways.Known() {
							s.m.queue.Add(k)
						}
					} else {
						s.m.enqueueChanged(last, now)
					}
					start := s.counter.reads.Load()
					for _, key := range s.drain() {
						if err := s.m.SyncOnce(b.Context(), key); err != nil {
							b.Fatal(err)
						}
						syncs++
					}
					reads += s.counter.reads.Load() - start
					// The sync's own write is the next change the watch sees.
					last, index = s.answer(b, "policies", next)
				}
				b.ReportMetric(float64(syncs)/float64(b.N), "syncs/change")
				b.ReportMetric(float64(reads)/float64(b.N), "reads/change")
			})
		}
	}
}
