package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/identity"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// identityStack is a Consul with ACLs on (default deny) and a Kubernetes auth method
// that checks tokens against the harness's API server, and the controller binary
// managing gateway identities in it with the documented policies.
type identityStack struct {
	consulStack
	agent *testenv.ConsulAgent
	admin *consulapi.Client
	namer identity.Namer
	// token is the controller's: deploy/'s policy and its identities policy; rules is
	// deploy/'s policy alone.
	token, rules string
}

const identityAuthMethod = "gateway-pods"

func newIdentityStack(t *testing.T, ns string) identityStack {
	t.Helper()
	agent, admin, rules := aclConsul(t)
	if err := env.CreateKubernetesAuthMethod(t.Context(), admin, identityAuthMethod); err != nil {
		t.Fatal(err)
	}
	identities, err := testenv.DeployPolicies("consul-acl-policy-identities.hcl")
	if err != nil {
		t.Fatal(err)
	}
	s := identityStack{consulStack: newConsulStack(t, ns), agent: agent, admin: admin, rules: rules}
	s.namer = identity.Namer{Ownership: translate.Ownership{Controller: string(s.Controller), ClusterID: ns}}
	s.token = testenv.ACLToken(t, admin, ns+"-controller", rules+"\n"+identities)
	return s
}

func (s identityStack) run(t *testing.T, name, token string) *testenv.Controller {
	t.Helper()
	return env.RunController(t, testenv.ControllerOptions{Name: name, ConsulAddr: s.agent.HTTPAddr(), ConsulToken: token, Args: []string{
		"--controller-name=" + string(s.Controller), "--cluster-id=" + s.Namespace, "--leader-elect=false",
		"--gateway-auth-method=" + identityAuthMethod, "-v=4",
	}})
}

// aclObjects is what Consul holds of one Gateway's identity.
type aclObjects struct {
	policy *consulapi.ACLPolicy
	role   *consulapi.ACLRole
	rules  []*consulapi.ACLBindingRule
}

// versions are the ModifyIndexes of the identity's objects.
func (o aclObjects) versions() testenv.Versions {
	v := testenv.Versions{}
	if o.policy != nil {
		v["policy "+o.policy.Name] = strconv.FormatUint(o.policy.ModifyIndex, 10)
	}
	if o.role != nil {
		v["role "+o.role.Name] = strconv.FormatUint(o.role.ModifyIndex, 10)
	}
	for _, r := range o.rules {
		v["binding rule "+r.ID] = strconv.FormatUint(r.ModifyIndex, 10)
	}
	return v
}

func (s identityStack) objects(ctx context.Context, gateway string) (aclObjects, error) {
	key := cache.ObjectName{Namespace: s.Namespace, Name: gateway}
	var o aclObjects
	var err error
	if o.policy, _, err = s.admin.ACL().PolicyReadByName(s.namer.Name(key), nil); err != nil {
		return o, err
	}
	if o.role, _, err = s.admin.ACL().RoleReadByName(s.namer.Name(key), nil); err != nil {
		return o, err
	}
	all, _, err := s.admin.ACL().BindingRuleList(identityAuthMethod, nil)
	for _, r := range all {
		if owner, ok := s.namer.OwnerOf(r.Description); ok && owner == key {
			o.rules = append(o.rules, r)
		}
	}
	return o, err
}

// complete reports whether the objects are the Gateway's whole identity, bound to the
// ServiceAccount the controller created (its UID).
func (s identityStack) complete(ctx context.Context, o aclObjects, gateway string) error {
	sa, err := env.KubeClient.CoreV1().ServiceAccounts(s.Namespace).Get(ctx, gateway+"-"+s.Class, metav1.GetOptions{})
	if err != nil {
		return err
	}
	want := s.namer.Desired(identity.Input{
		Gateway: cache.ObjectName{Namespace: s.Namespace, Name: gateway}, Service: s.naming.EntryName(s.Namespace, gateway),
		ServiceAccount: sa.Name, ServiceAccountUID: sa.UID, AuthMethod: identityAuthMethod,
	})
	switch {
	case o.policy == nil || o.policy.Rules != want.Rules:
		return fmt.Errorf("policy %s = %+v, want the rules of %s", want.Name, o.policy, gateway)
	case o.role == nil || len(o.role.Policies) != 1 || o.role.Policies[0].ID != o.policy.ID:
		return fmt.Errorf("role %s = %+v, want it to hold policy %s only", want.Name, o.role, o.policy.ID)
	case len(o.rules) != 1 || o.rules[0].Selector != want.BindingRule.Selector || o.rules[0].BindName != want.Name:
		return fmt.Errorf("binding rules = %+v, want one binding %s with %s", o.rules, want.Name, want.BindingRule.Selector)
	}
	return nil
}

func (s identityStack) awaitComplete(t *testing.T, gateway, what string) aclObjects {
	t.Helper()
	var o aclObjects
	testenv.Eventually(t, 60*time.Second, what, func(ctx context.Context) error {
		var err error
		if o, err = s.objects(ctx, gateway); err != nil {
			return err
		}
		return s.complete(ctx, o, gateway)
	})
	return o
}

func (s identityStack) awaitProgrammedMessage(t *testing.T, gateway, what, fragment string) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, what, func(ctx context.Context) error {
		g, err := env.GatewayClient.GatewayV1().Gateways(s.Namespace).Get(ctx, gateway, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := testenv.ConditionText(g.Status.Conditions, "Programmed"); !strings.Contains(got, fragment) {
			return fmt.Errorf("Programmed = %s, want it to say %q", got, fragment)
		}
		return nil
	})
}

// TestGatewayIdentities runs the controller binary with --gateway-auth-method against
// a default-deny Consul: each accepted Gateway gets a policy, role and binding rule of
// its own; a restart writes nothing; hand edits and deletions are put back; a foreign
// object of the same name is left alone and the Gateway says so; and a Gateway that
// goes takes its identity with it.
func TestGatewayIdentities(t *testing.T) {
	s := newIdentityStack(t, "identity")
	p := s.run(t, "identity", s.token)
	first := s.awaitComplete(t, "edge", "the Gateway's identity written")

	// A converged restart writes nothing.
	if _, err := p.Terminate(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	p = s.run(t, "identity-restarted", s.token)
	// Judged once the restarted controller synced the Gateway's identity and went
	// idle; Consul's ModifyIndexes are the evidence apart from its own counter.
	metrics := testenv.Settled(t, p, "identity")
	if got := testenv.MetricSum(metrics, "consul_gateway_controller_consul_acl_writes_total"); got != 0 {
		t.Errorf("a restart over a converged identity made %v ACL writes, want 0", got)
	}
	again, err := s.objects(t.Context(), "edge")
	if err != nil {
		t.Fatal(err)
	}
	if changes := first.versions().Changes(again.versions()); len(changes) > 0 {
		t.Errorf("a restart over a converged identity changed it in Consul: %s", strings.Join(changes, "; "))
	}

	// Hand edits: a binding rule that binds every ServiceAccount, a deleted policy.
	rule := *first.rules[0]
	rule.Selector = ""
	if _, _, err := s.admin.ACL().BindingRuleUpdate(&rule, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.admin.ACL().PolicyDelete(first.policy.ID, nil); err != nil {
		t.Fatal(err)
	}
	s.awaitComplete(t, "edge", "the hand-edited binding rule and the deleted policy put back")

	// A foreign policy named like a new Gateway's: never changed, and the Gateway
	// says so; nothing else of its identity is written.
	foreign := cache.ObjectName{Namespace: s.Namespace, Name: "taken"}
	if _, _, err := s.admin.ACL().PolicyCreate(&consulapi.ACLPolicy{Name: s.namer.Name(foreign), Description: "someone else's", Rules: `service "x" { policy = "read" }`}, nil); err != nil {
		t.Fatal(err)
	}
	env.Create(t, s.Gateway("taken", testenv.HTTPListener("http", 18081)))
	s.awaitProgrammedMessage(t, "taken", "the foreign policy reported", "that this controller did not write")
	o, err := s.objects(t.Context(), "taken")
	if err != nil {
		t.Fatal(err)
	}
	if o.policy.Description != "someone else's" || o.role != nil || len(o.rules) != 0 {
		t.Errorf("beside a foreign policy: policy %+v, role %+v, binding rules %+v; want the policy untouched and nothing else", o.policy, o.role, o.rules)
	}

	// A Gateway that goes takes its identity with it; the foreign policy stays.
	for _, gw := range []string{"edge", "taken"} {
		if err := env.GatewayClient.GatewayV1().Gateways(s.Namespace).Delete(t.Context(), gw, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 60*time.Second, "the deleted Gateway's identity removed", func(ctx context.Context) error {
		o, err := s.objects(ctx, "edge")
		if err != nil {
			return err
		}
		if o.policy != nil || o.role != nil || len(o.rules) != 0 {
			return fmt.Errorf("left: policy %v, role %v, %d binding rules", o.policy != nil, o.role != nil, len(o.rules))
		}
		return nil
	})
	if o, err := s.objects(t.Context(), "taken"); err != nil || o.policy == nil || o.policy.Description != "someone else's" {
		t.Errorf("the foreign policy after its namesake Gateway went: %+v (%v), want it untouched", o.policy, err)
	}
}

// TestGatewayIdentityRefusals: what the controller cannot do is said on the Gateway,
// and nothing is half-written: a token without acl = "write", and an auth method that
// does not exist.
func TestGatewayIdentityRefusals(t *testing.T) {
	s := newIdentityStack(t, "identity-refused")
	withoutACL := testenv.ACLToken(t, s.admin, "identity-refused-no-acl", s.rules)
	p := s.run(t, "identity-no-acl", withoutACL)
	s.awaitProgrammedMessage(t, "edge", "the missing acl permission reported", `lacks acl = "write"`)
	if o, err := s.objects(t.Context(), "edge"); err != nil || o.policy != nil || o.role != nil || len(o.rules) != 0 {
		t.Errorf("without acl write: policy %v, role %v, binding rules %d (%v); want nothing", o.policy != nil, o.role != nil, len(o.rules), err)
	}
	if _, err := p.Terminate(10 * time.Second); err != nil {
		t.Fatal(err)
	}

	if _, err := s.admin.ACL().AuthMethodDelete(identityAuthMethod, nil); err != nil {
		t.Fatal(err)
	}
	s.run(t, "identity-no-method", s.token)
	s.awaitProgrammedMessage(t, "edge", "the missing auth method reported", `no auth method "gateway-pods"`)
	if o, err := s.objects(t.Context(), "edge"); err != nil || o.policy != nil || o.role != nil || len(o.rules) != 0 {
		t.Errorf("without the auth method: policy %v, role %v, binding rules %d (%v); want nothing", o.policy != nil, o.role != nil, len(o.rules), err)
	}
	// Created later, it is used.
	if err := env.CreateKubernetesAuthMethod(t.Context(), s.admin, identityAuthMethod); err != nil {
		t.Fatal(err)
	}
	s.awaitComplete(t, "edge", "the identity written once the auth method exists")
}

// TestGatewayIdentityWithoutACLs: the flag on, and a Consul whose ACLs are off (the
// Env's): the Gateway says the pods cannot log in, and why.
func TestGatewayIdentityWithoutACLs(t *testing.T) {
	s := newConsulStack(t, "identity-acl-off")
	env.RunController(t, testenv.ControllerOptions{Name: "identity-acl-off", Args: []string{
		"--controller-name=" + string(s.Controller), "--cluster-id=" + s.Namespace, "--leader-elect=false",
		"--gateway-auth-method=" + identityAuthMethod,
	}})
	identityStack{consulStack: s}.awaitProgrammedMessage(t, "edge", "ACLs off reported", "Consul's ACLs are disabled")
}
