package integration

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// What the deploy tests read in a controller's log: the API server's RBAC refusals.

// refusal is one RBAC refusal the API server answered, as client-go logs it.
type refusal struct{ verb, resource, group string }

func (r refusal) String() string { return fmt.Sprintf("%s %s (group %q)", r.verb, r.resource, r.group) }

// refusalPattern matches the authorizer's "forbidden" message; the quotes are escaped
// when the message is a structured log value.
var refusalPattern = regexp.MustCompile(`cannot (\w+) resource \\?"([^"\\]*)\\?" in API group \\?"([^"\\]*)\\?"`)

// terminatingNamespace is the API server's refusal of a write into a namespace being
// deleted (NamespaceLifecycle, a 403 too): another test's namespace going away while
// this controller still reports on it, not a refusal of its rights.
var terminatingNamespace = regexp.MustCompile(`(?i)forbidden: unable to create new content in namespace \S+ because it is being terminated`)

// refusals lists the RBAC refusals in a process log. mentionsForbidden also reports a
// "forbidden" the pattern could not parse, so no refusal goes unnoticed.
func refusals(log string) (found []refusal, mentionsForbidden bool) {
	for _, m := range refusalPattern.FindAllStringSubmatch(log, -1) {
		r := refusal{m[1], m[2], m[3]}
		if !slices.Contains(found, r) {
			found = append(found, r)
		}
	}
	rest := terminatingNamespace.ReplaceAllString(log, "")
	return found, strings.Contains(strings.ToLower(rest), "forbidden")
}

// refusalLine is the first log line refusing r, shortened, to show what refused it.
func refusalLine(log string, r refusal) string {
	for line := range strings.Lines(log) {
		for _, m := range refusalPattern.FindAllStringSubmatch(line, -1) {
			if (refusal{m[1], m[2], m[3]}) == r {
				if line = strings.TrimSpace(line); len(line) > 300 {
					line = line[:300] + "..."
				}
				return line
			}
		}
	}
	return ""
}

// assertNoRefusal fails the test if the process was refused anything by RBAC.
func assertNoRefusal(t *testing.T, p *testenv.Controller) {
	t.Helper()
	log := p.Output()
	if found, forbidden := refusals(log); len(found) > 0 || forbidden {
		t.Fatalf("%s was refused by RBAC: %v\n--- log tail ---\n%s", p.Name(), found, testenv.Tail(log, 30))
	}
}

// waitConverged waits for the example to converge under p, failing early if p exits or
// is refused anything.
func waitConverged(t *testing.T, p *testenv.Controller, x deployExample, controller gatewayv1.GatewayController, timeout time.Duration) {
	t.Helper()
	err := testenv.Poll(t.Context(), 200*time.Millisecond, timeout, func(context.Context) error {
		assertNoRefusal(t, p)
		if !p.Running() {
			t.Fatalf("%s exited before the example converged: %v\n--- log tail ---\n%s", p.Name(), p.ExitError(), testenv.Tail(p.Output(), 30))
		}
		return x.converged(t, controller)
	})
	if err != nil {
		t.Fatalf("the example did not converge: %v\n--- log tail ---\n%s", err, testenv.Tail(p.Output(), 30))
	}
}
