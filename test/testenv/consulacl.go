package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	consulapi "github.com/hashicorp/consul/api"
)

// StartConsulFor starts a Consul agent of the test's own with opts, stopped when t
// ends, and returns it with a client holding its management token (if any).
func StartConsulFor(t testing.TB, logDir string, opts ConsulOptions) (*ConsulAgent, *consulapi.Client) {
	t.Helper()
	agent, err := StartConsulWith(logDir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.Stop() })
	admin, err := agent.Client()
	if err != nil {
		t.Fatal(err)
	}
	return agent, admin
}

// ACLToken creates a policy called name with rules and a token holding it, through
// client (a management token), and returns the token's secret.
func ACLToken(t testing.TB, client *consulapi.Client, name, rules string) string {
	t.Helper()
	secret, err := CreateACLToken(client, name, rules)
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

// CreateACLToken is ACLToken for callers without a test.
func CreateACLToken(client *consulapi.Client, name, rules string) (string, error) {
	policy, _, err := client.ACL().PolicyCreate(&consulapi.ACLPolicy{Name: name, Rules: rules}, nil)
	if err != nil {
		return "", err
	}
	token, _, err := client.ACL().TokenCreate(&consulapi.ACLToken{Description: name, Policies: []*consulapi.ACLTokenPolicyLink{{ID: policy.ID}}}, nil)
	if err != nil {
		return "", err
	}
	return token.SecretID, nil
}

// DeployPolicies is the text of the named Consul ACL policy files of deploy/, joined:
// what an operator attaches to the controller's token.
func DeployPolicies(files ...string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	rules := make([]string, 0, len(files))
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, "deploy", f))
		if err != nil {
			return "", err
		}
		rules = append(rules, string(b))
	}
	return strings.Join(rules, "\n"), nil
}
