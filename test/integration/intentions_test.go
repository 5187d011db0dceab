package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/intentions"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// TestIntentions runs the controller binary against a Consul with ACLs on and default
// deny, with the documented policy. Consul's own intention check is the judge: each
// service a route sends to (its backend, the blackhole of a rule without one, the
// target a resolver redirects to) allows the route's gateway, and stops allowing it
// once no route needs it; a source another team wrote on the same entry survives
// every write; a source of ours removed by hand comes back; an entry left with only
// our source is deleted.
func TestIntentions(t *testing.T) {
	agent, admin, rules := aclConsul(t)
	s := newConsulStack(t, "intentions")
	gateway := s.naming.EntryName(s.Namespace, "edge")
	backend, moved, blackhole := s.Backend, s.Backend+"-v2", s.naming.BlackholeService()
	marker := intentions.Marker(translate.Ownership{Controller: string(s.Controller), ClusterID: s.Namespace})

	// Another team's source on the backend's entry, written before the controller runs.
	team := &consulapi.SourceIntention{Name: "team-web", Action: consulapi.IntentionActionDeny, Type: consulapi.IntentionSourceConsul, Description: "team web"}
	if _, _, err := admin.ConfigEntries().Set(&consulapi.ServiceIntentionsConfigEntry{
		Kind: consulapi.ServiceIntentions, Name: backend, Sources: []*consulapi.SourceIntention{team},
	}, nil); err != nil {
		t.Fatal(err)
	}
	allowed := func(ctx context.Context, destination string) (bool, error) {
		ok, _, err := admin.Connect().IntentionCheck(&consulapi.IntentionCheck{
			Source: gateway, Destination: destination, SourceType: consulapi.IntentionSourceConsul,
		}, (&consulapi.QueryOptions{}).WithContext(ctx))
		return ok, err
	}
	expect := func(what string, want map[string]bool) {
		t.Helper()
		testenv.Eventually(t, 60*time.Second, what, func(ctx context.Context) error {
			for destination, wantAllowed := range want {
				got, err := allowed(ctx, destination)
				if err != nil {
					return err
				}
				if got != wantAllowed {
					return fmt.Errorf("Consul's intention check %s -> %s says allowed=%v", gateway, destination, got)
				}
			}
			return nil
		})
	}
	teamSourceKept := func() {
		t.Helper()
		entry := s.intentionsOf(t, admin, backend)
		if entry == nil || !hasSource(entry, func(src *consulapi.SourceIntention) bool {
			return src.Name == "team-web" && src.Action == consulapi.IntentionActionDeny && src.Description == "team web"
		}) {
			t.Fatalf("the other team's source on %s is gone or changed: %+v", backend, entry)
		}
	}

	// Default deny holds before anything is written: the check can fail.
	expect("default deny before the controller runs", map[string]bool{backend: false, blackhole: false})

	token := testenv.ACLToken(t, admin, "intentions-controller", rules)
	run := func(name string) *testenv.Controller {
		return env.RunController(t, testenv.ControllerOptions{Name: name, ConsulAddr: agent.HTTPAddr(), ConsulToken: token,
			Args: []string{"--controller-name=" + string(s.Controller), "--cluster-id=" + s.Namespace, "--leader-elect=false", "--deploy-gateways=false", "-v=4"}})
	}
	controller := run("intentions")
	env.Create(t, s.Route("web"))
	// A rule whose backend does not exist sends to the blackhole.
	env.Create(t, testenv.HTTPRoute(s.Namespace, "broken", []gatewayv1.ParentReference{{Name: "edge"}}, testenv.Backend("missing", testenv.BackendPort)))
	expect("the gateway is let through to the backend and the blackhole", map[string]bool{backend: true, blackhole: true})
	teamSourceKept()

	// A hand edit that removes our source is put back; the other team's stays.
	entry := s.intentionsOf(t, admin, backend)
	entry.Sources = []*consulapi.SourceIntention{team}
	if ok, _, err := admin.ConfigEntries().CAS(entry, entry.ModifyIndex, nil); err != nil || !ok {
		t.Fatalf("remove our source by hand: ok=%v err=%v", ok, err)
	}
	expect("our source put back after a hand edit", map[string]bool{backend: true})
	teamSourceKept()

	// A resolver that redirects the backend makes its target the destination: the
	// target is allowed, and the backend, no longer in the chain, is not.
	if _, _, err := admin.ConfigEntries().Set(&consulapi.ServiceResolverConfigEntry{
		Kind: consulapi.ServiceResolver, Name: backend, Redirect: &consulapi.ServiceResolverRedirect{Service: moved},
	}, nil); err != nil {
		t.Fatal(err)
	}
	expect("the redirect's target is allowed instead of the backend", map[string]bool{moved: true, backend: false})
	teamSourceKept()
	if _, err := admin.ConfigEntries().Delete(consulapi.ServiceResolver, backend, nil); err != nil {
		t.Fatal(err)
	}
	expect("the backend is allowed again once the redirect goes", map[string]bool{backend: true, moved: false})
	if e := s.intentionsOf(t, admin, moved); e != nil {
		t.Errorf("the redirect target's entry held only our source and outlived it: %+v", e)
	}

	// A restart over converged intentions compares every destination of ours and
	// writes nothing: Consul's indexes do not move.
	before := map[string]uint64{}
	for _, name := range []string{backend, blackhole} {
		before[name] = s.intentionsOf(t, admin, name).ModifyIndex
	}
	if err := controller.Kill(); err != nil {
		t.Fatal(err)
	}
	controller = run("intentions-restarted")
	testenv.Eventually(t, 60*time.Second, "the restarted controller compared both destinations", func(ctx context.Context) error {
		body, err := controller.Metrics(ctx)
		if err != nil {
			return err
		}
		adds := testenv.MetricSum(body, "workqueue_adds_total", `name="intentions"`)
		depth := testenv.MetricSum(body, "workqueue_depth", `name="intentions"`)
		working := testenv.MetricSum(body, "workqueue_unfinished_work_seconds", `name="intentions"`)
		if adds < 2 || depth != 0 || working != 0 {
			return fmt.Errorf("intentions queue: %v adds, depth %v, unfinished %vs", adds, depth, working)
		}
		if writes := testenv.MetricSum(body, "consul_gateway_controller_consul_writes_total", `kind="service-intentions"`); writes != 0 {
			return fmt.Errorf("the restarted controller wrote service-intentions %v times", writes)
		}
		return nil
	})
	for name, index := range before {
		if now := s.intentionsOf(t, admin, name).ModifyIndex; now != index {
			t.Errorf("service-intentions %s was written on restart: ModifyIndex %d, was %d", name, now, index)
		}
	}

	// Once no route sends there, our sources go; an entry left with none is deleted,
	// one with another source keeps it.
	for _, name := range []string{"web", "broken"} {
		if err := env.GatewayClient.GatewayV1().HTTPRoutes(s.Namespace).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	expect("nothing is allowed once the routes are gone", map[string]bool{backend: false, blackhole: false})
	testenv.Eventually(t, 30*time.Second, "the blackhole's entry, ours alone, is deleted", func(context.Context) error {
		if e := s.intentionsOf(t, admin, blackhole); e != nil {
			return fmt.Errorf("service-intentions %s is still there: %+v", blackhole, e.Sources)
		}
		return nil
	})
	teamSourceKept()
	if e := s.intentionsOf(t, admin, backend); hasSource(e, func(src *consulapi.SourceIntention) bool { return src.Description == marker }) {
		t.Errorf("a source of ours outlived the routes on %s: %+v", backend, e.Sources)
	}
}

// intentionsOf reads the service-intentions entry of name; nil when there is none.
func (s consulStack) intentionsOf(t *testing.T, client *consulapi.Client, name string) *consulapi.ServiceIntentionsConfigEntry {
	t.Helper()
	entries, _, err := client.ConfigEntries().List(consulapi.ServiceIntentions, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.GetName() == name {
			return e.(*consulapi.ServiceIntentionsConfigEntry)
		}
	}
	return nil
}

func hasSource(entry *consulapi.ServiceIntentionsConfigEntry, match func(*consulapi.SourceIntention) bool) bool {
	if entry == nil {
		return false
	}
	for _, src := range entry.Sources {
		if match(src) {
			return true
		}
	}
	return false
}
