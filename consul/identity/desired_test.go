package identity

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/client-go/tools/cache"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

var namer = Namer{Ownership: translate.Ownership{Controller: "example.com/gateway-controller", ClusterID: "east"}}

// consulACLName is what Consul accepts as a policy name.
var consulACLName = regexp.MustCompile(`^[A-Za-z0-9\-_]{1,128}$`)

func TestNamesAreValidAndDistinct(t *testing.T) {
	long := strings.Repeat("a", 253)
	gateways := []cache.ObjectName{
		{Namespace: "a-b", Name: "c"},
		{Namespace: "a", Name: "b-c"},
		{Namespace: "team", Name: "edge.v1"},
		{Namespace: "team", Name: "edge-v1"},
		{Namespace: "team", Name: long},
		{Namespace: "team", Name: long[:252] + "b"},
	}
	seen := map[string]cache.ObjectName{}
	for _, gw := range gateways {
		name := namer.Name(gw)
		if !consulACLName.MatchString(name) {
			t.Errorf("Name(%s) = %q: Consul refuses it", gw, name)
		}
		if other, dup := seen[name]; dup {
			t.Errorf("Name(%s) = Name(%s) = %q", gw, other, name)
		}
		seen[name] = gw
		if again := namer.Name(gw); again != name {
			t.Errorf("Name(%s) is not deterministic: %q then %q", gw, name, again)
		}
	}
	other := Namer{Ownership: translate.Ownership{Controller: namer.Ownership.Controller, ClusterID: "west"}}
	if gw := gateways[0]; other.Name(gw) == namer.Name(gw) {
		t.Errorf("two clusters share the name %q of Gateway %s", namer.Name(gw), gw)
	}
	if got := (Namer{Prefix: "prod.", Ownership: namer.Ownership}).Name(gateways[0]); !strings.HasPrefix(got, "prod-gateway-a-b-c-") {
		t.Errorf("Name with prefix prod. = %q, want it to start with prod-gateway-a-b-c-", got)
	}
}

func TestOwnerOf(t *testing.T) {
	gw := cache.ObjectName{Namespace: "team", Name: "edge"}
	if got, ok := namer.OwnerOf(namer.Description(gw)); !ok || got != gw {
		t.Errorf("OwnerOf(Description(%s)) = %s, %v", gw, got, ok)
	}
	for _, description := range []string{
		"",
		"API Gateway token Policy",
		// Another cluster's, and another controller's: never ours.
		Namer{Ownership: translate.Ownership{Controller: namer.Ownership.Controller, ClusterID: "west"}}.Description(gw),
		Namer{Ownership: translate.Ownership{Controller: "other.example/ctl", ClusterID: "east"}}.Description(gw),
		descriptionPrefix + "team" + namer.descriptionSuffix(),
		descriptionPrefix + "team/a/b" + namer.descriptionSuffix(),
	} {
		if got, ok := namer.OwnerOf(description); ok {
			t.Errorf("OwnerOf(%q) = %s: want not ours", description, got)
		}
	}
}

func TestDesiredBindsOnlyTheGatewaysServiceAccount(t *testing.T) {
	gw := cache.ObjectName{Namespace: "team", Name: "edge"}
	id := namer.Desired(Input{Gateway: gw, Service: "edge.team", ServiceAccount: "edge-consul", ServiceAccountUID: "6b1f0c2e-uid", AuthMethod: "k8s"})
	rule := id.BindingRule
	if rule.AuthMethod != "k8s" || rule.BindType != "role" || rule.BindName != id.Name {
		t.Errorf("binding rule = %+v, want role %s in auth method k8s", rule, id.Name)
	}
	// The UID binds the ServiceAccount the controller created, not any made later
	// under its name.
	if want := `serviceaccount.namespace=="team" and serviceaccount.name=="edge-consul" and serviceaccount.uid=="6b1f0c2e-uid"`; rule.Selector != want {
		t.Errorf("selector = %s, want %s", rule.Selector, want)
	}
	// The one write grant is the Gateway's own service.
	writes := regexp.MustCompile(`(?m)^(\w+) "([^"]*)" \{\n  policy = "write"`).FindAllStringSubmatch(id.Rules, -1)
	if len(writes) != 1 || writes[0][1] != "service" || writes[0][2] != "edge.team" {
		t.Errorf("write grants = %q, want only service \"edge.team\"\n%s", writes, id.Rules)
	}
	if strings.Contains(id.Rules, `"write"`) && strings.Count(id.Rules, `"write"`) != 1 {
		t.Errorf("rules grant write more than once:\n%s", id.Rules)
	}
}

// TestDocumentedPolicy: deploy/README.md prints the policy as the controller writes it.
func TestDocumentedPolicy(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "deploy", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := policyRules(cache.ObjectName{Namespace: "demo", Name: "edge"}, "edge.demo")
	if !strings.Contains(string(readme), "```hcl\n"+want+"```") {
		t.Errorf("deploy/README.md does not print the policy of demo/edge as written:\n%s", want)
	}
}
