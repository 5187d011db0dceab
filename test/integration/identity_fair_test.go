package integration

import (
	"context"
	"fmt"
	"net/http"
	"path"
	"strings"
	gosync "sync"
	"testing"
	"time"

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
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/identity"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// identityReads counts the Consul reads a Manager makes: all of them, and those of
// each Gateway's policy and role by name, two per sync of a Gateway with an identity.
type identityReads struct {
	base   http.RoundTripper
	mu     gosync.Mutex
	total  int
	byName map[string]int
}

func (c *identityReads) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet {
		c.mu.Lock()
		c.total++
		if strings.HasPrefix(r.URL.Path, "/v1/acl/policy/name/") || strings.HasPrefix(r.URL.Path, "/v1/acl/role/name/") {
			c.byName[path.Base(r.URL.Path)]++
		}
		c.mu.Unlock()
	}
	return c.base.RoundTrip(r)
}

// reset returns the counts so far and starts again from zero.
func (c *identityReads) reset() (total int, byName map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	total, byName = c.total, c.byName
	c.total, c.byName = 0, map[string]int{}
	return total, byName
}

// fairIdentities is an identity Manager run in-process, one worker, against a Consul
// with ACLs on (default deny) and a Kubernetes auth method, keeping the identities of
// Gateways g000, g001, ..., whose Consul reads are counted.
type fairIdentities struct {
	admin    *consulapi.Client
	namer    identity.Namer
	reads    *identityReads
	gateways []cache.ObjectName
}

func runFairIdentities(tb testing.TB, gateways int) fairIdentities {
	tb.Helper()
	agent, admin := testenv.StartConsulFor(tb, env.LogDir(), testenv.ConsulOptions{ACL: true})
	if err := env.CreateKubernetesAuthMethod(tb.Context(), admin, identityAuthMethod); err != nil {
		tb.Fatal(err)
	}
	reads := &identityReads{base: http.DefaultTransport, byName: map[string]int{}}
	client, err := consulapi.NewClient(&consulapi.Config{Address: agent.HTTPAddr(), Token: agent.ManagementToken(), HttpClient: &http.Client{Transport: reads}})
	if err != nil {
		tb.Fatal(err)
	}
	classes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := classes.Add(&gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "ours"}}); err != nil {
		tb.Fatal(err)
	}
	serviceAccounts := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	f := fairIdentities{admin: admin, reads: reads, namer: identity.Namer{Ownership: translate.Ownership{Controller: "fair.example.com/controller", ClusterID: "fair"}}}
	m := identity.NewManager(identity.Config{
		Client:  client,
		Namer:   f.namer,
		Classes: gatewaylisters.NewGatewayClassLister(classes),
		Configs: listers.New[*v1alpha1.GatewayConfig](cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}), v1alpha1.Resource("gatewayconfigs")),
		Pods: func(gw *gatewayv1.Gateway, _ *v1alpha1.GatewayConfig) (string, string) {
			return gw.Name + "-ours", identityAuthMethod
		},
		ServiceAccounts:       corelisters.NewServiceAccountLister(serviceAccounts),
		ServiceAccountsSynced: func() bool { return true },
		Workers:               1,
	})
	for i := range gateways {
		gw := &gatewayv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Namespace: "fair", Name: fmt.Sprintf("g%03d", i), UID: types.UID(fmt.Sprintf("fair-g%03d", i)), Generation: 1},
			Spec:       gatewayv1.GatewaySpec{GatewayClassName: "ours"},
			Status: gatewayv1.GatewayStatus{Conditions: []metav1.Condition{
				{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 1},
			}},
		}
		owner := metav1.NewControllerRef(gw, schema.GroupVersionKind{Group: gatewayv1.GroupName, Version: "v1", Kind: "Gateway"})
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: gw.Namespace, Name: gw.Name + "-ours", UID: gw.UID + "-sa", OwnerReferences: []metav1.OwnerReference{*owner}}}
		if err := serviceAccounts.Add(sa); err != nil {
			tb.Fatal(err)
		}
		key := cache.MetaObjectToName(gw)
		m.Publish(tb.Context(), contract.Confirmation{Kind: gatewayapi.GatewayKind, Key: key, Object: gw})
		f.gateways = append(f.gateways, key)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	initialSyncDone := make(chan struct{})
	close(initialSyncDone)
	go func() { done <- m.Run(ctx, initialSyncDone) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Error(err)
		}
	})
	for _, gw := range f.gateways {
		f.awaitPolicy(tb, gw, "")
	}
	return f
}

// awaitPolicy waits until the Gateway's policy exists, other than unwanted ("" for
// any), and returns its rules.
func (f fairIdentities) awaitPolicy(tb testing.TB, gateway cache.ObjectName, unwanted string) string {
	tb.Helper()
	var rules string
	testenv.Eventually(tb, 60*time.Second, "the policy of "+gateway.String()+" written", func(context.Context) error {
		policy, _, err := f.admin.ACL().PolicyReadByName(f.namer.Name(gateway), nil)
		switch {
		case err != nil:
			return err
		case policy == nil:
			return fmt.Errorf("no policy %s", f.namer.Name(gateway))
		case unwanted != "" && policy.Rules == unwanted:
			return fmt.Errorf("policy %s still has the hand-edited rules", policy.Name)
		}
		rules = policy.Rules
		return nil
	})
	return rules
}

// handEdit changes the rules of the Gateway's policy by hand and waits until the
// Manager put them back.
func (f fairIdentities) handEdit(tb testing.TB, gateway cache.ObjectName, n int) {
	tb.Helper()
	policy, _, err := f.admin.ACL().PolicyReadByName(f.namer.Name(gateway), nil)
	if err != nil || policy == nil {
		tb.Fatalf("policy of %s: %+v, %v", gateway, policy, err)
	}
	policy.Rules = fmt.Sprintf(`service "hand-edit-%d" { policy = "write" }`, n)
	if _, _, err := f.admin.ACL().PolicyUpdate(policy, nil); err != nil {
		tb.Fatal(err)
	}
	f.awaitPolicy(tb, gateway, policy.Rules)
}

// syncsOf counts the syncs of gateway among byName: each reads its policy and role.
func (f fairIdentities) syncsOf(byName map[string]int, gateway cache.ObjectName) int {
	return byName[f.namer.Name(gateway)] / 2
}

// TestIdentitySyncsOnlyTheChangedGateway: with four Gateways' identities in a real
// Consul, a hand edit of one Gateway's policy is put back by syncing that Gateway
// alone: the two Gateways left alone are not read at all. Before, each change of an
// ACL list synced every Gateway, with four consistent reads each.
func TestIdentitySyncsOnlyTheChangedGateway(t *testing.T) {
	f := runFairIdentities(t, 4)
	edited, sentinel := f.gateways[2], f.gateways[1]
	// The sentinel's edit is put back by the one worker after every sync queued
	// before it: what the start queued is done.
	f.handEdit(t, sentinel, 0)
	f.reads.reset()

	f.handEdit(t, edited, 1)
	f.handEdit(t, sentinel, 2)
	_, byName := f.reads.reset()
	if got := f.syncsOf(byName, edited); got == 0 {
		t.Errorf("the hand-edited Gateway %s was synced %d times, want at least once (reads %v)", edited, got, byName)
	}
	for _, other := range []cache.ObjectName{f.gateways[0], f.gateways[3]} {
		if got := byName[f.namer.Name(other)]; got != 0 {
			t.Errorf("Gateway %s, whose ACL objects did not change, had its policy or role read %d times, want 0 (reads %v)", other, got, byName)
		}
	}
}

// BenchmarkIdentitySyncsPerACLChange counts, on a real Consul, what one hand edit of
// one Gateway's policy costs the identity Manager until it is put back, with 10 and
// with 200 Gateways (the baseline is G=10, in the same run): the syncs of the edited
// Gateway (its put-back is a change too, which brings it back once more), the syncs
// of every other Gateway, and Consul reads. Before, each change of an ACL list synced
// every Gateway: syncs grew with G (10 and 200 per change) and reads with them (4 per
// sync, one a list of every binding rule).
func BenchmarkIdentitySyncsPerACLChange(b *testing.B) {
	for _, gateways := range []int{10, 200} {
		b.Run(fmt.Sprintf("gateways=%d", gateways), func(b *testing.B) {
			f := runFairIdentities(b, gateways)
			prev := f.gateways[gateways-1]
			f.handEdit(b, prev, -1)
			f.reads.reset()
			var reads, own, others int
			b.ResetTimer()
			for i := range b.N {
				edited := f.gateways[i%gateways]
				f.handEdit(b, edited, i)
				total, byName := f.reads.reset()
				reads += total
				for _, gw := range f.gateways {
					if gw == edited || gw == prev {
						own += f.syncsOf(byName, gw)
					} else {
						others += f.syncsOf(byName, gw)
					}
				}
				prev = edited
			}
			b.ReportMetric(float64(own)/float64(b.N), "edited-syncs/change")
			b.ReportMetric(float64(others)/float64(b.N), "other-syncs/change")
			b.ReportMetric(float64(reads)/float64(b.N), "reads/change")
		})
	}
}
