package integration

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// TestSecretCacheWatchesOnlyPermittedReferencesOfOurClasses runs the controller with a
// cap of 2 Secrets per namespace: a Gateway of another controller's class naming 50
// Secrets opens no watch, nor does one of ours naming a Secret of another namespace
// without a grant; the grant opens one. Past the cap a listener says so; a Secret
// whose certificate is over the size limit is refused with a condition, while one
// padded with other keys is served.
func TestSecretCacheWatchesOnlyPermittedReferencesOfOurClasses(t *testing.T) {
	s := env.NewStack(t, "secret-scope")
	certs := env.NewNamespace(t, "secret-scope-certs")
	busy := env.NewNamespace(t, "secret-scope-busy")
	env.Create(t, testenv.GatewayClass("secret-scope-theirs", "test.example.com/someone-else"))
	cert, key := testenv.SelfSigned(t, "scope.example.com")

	var theirRefs []gatewayv1.SecretObjectReference
	for n := range 50 {
		name := fmt.Sprintf("theirs-%d", n)
		env.Create(t, testenv.TLSSecret(s.Namespace, name, cert, key))
		theirRefs = append(theirRefs, gatewayv1.SecretObjectReference{Name: gatewayv1.ObjectName(name)})
	}
	env.Create(t, testenv.Gateway(s.Namespace, "foreign", "secret-scope-theirs", testenv.HTTPSListener("https", 18443, theirRefs...)))
	env.Create(t, testenv.TLSSecret(certs, "shared", cert, key))
	env.Create(t, s.Gateway("cross", testenv.HTTPSListener("https", 18443,
		gatewayv1.SecretObjectReference{Name: "shared", Namespace: new(gatewayv1.Namespace(certs))})))

	p := env.RunController(t, testenv.ControllerOptions{Name: "secret-scope", Args: []string{
		"--controller-name=" + string(s.Controller), "--cluster-id=secret-scope", "--deploy-gateways=false", "--leader-elect=false",
		"--secrets-per-namespace=2",
	}})
	if err := p.WaitReady(t.Context(), 60*time.Second); err != nil {
		t.Fatal(err)
	}
	waitListener(t, s.Namespace, "cross", "False/RefNotPermitted", "")
	wantSecretGauges(t, p, 0, "with 50 references of another class and one not permitted")

	env.Create(t, testenv.ReferenceGrant(certs, "to-cross", "Secret",
		gatewayv1.ReferenceGrantFrom{Group: gatewayv1.GroupName, Kind: "Gateway", Namespace: gatewayv1.Namespace(s.Namespace)}))
	waitListener(t, s.Namespace, "cross", "True/ResolvedRefs", "")
	wantSecretGauges(t, p, 1, "once a grant permits the reference")

	// busy: the first Gateway takes the cap with a padded and an oversize Secret.
	padded := testenv.TLSSecret(busy, "padded", cert, key)
	padded.Data["padding"] = bytes.Repeat([]byte{'x'}, 512<<10)
	env.Create(t, padded)
	env.Create(t, testenv.TLSSecret(busy, "oversize", append(bytes.Repeat([]byte{'\n'}, 64<<10), cert...), key))
	env.Create(t, testenv.TLSSecret(busy, "third", cert, key))
	env.Create(t, testenv.Gateway(busy, "first", s.Class,
		testenv.HTTPSListener("padded", 18443, gatewayv1.SecretObjectReference{Name: "padded"}),
		testenv.HTTPSListener("oversize", 18444, gatewayv1.SecretObjectReference{Name: "oversize"})))
	waitListener(t, busy, "first", "True/ResolvedRefs", "padded")
	waitListener(t, busy, "first", "False/InvalidCertificateRef", "oversize", "is refused", "over the controller's limit of 65536")
	// Created after "first", or in the same second and after it by name: its Secret is
	// the namespace's third.
	env.Create(t, testenv.Gateway(busy, "second", s.Class, testenv.HTTPSListener("https", 18443, gatewayv1.SecretObjectReference{Name: "third"})))
	waitListener(t, busy, "second", "False/InvalidCertificateRef", "https", "is not watched", "more than 2 Secrets")
	wantSecretGauges(t, p, 3, "with busy's namespace at its cap")
	body, err := p.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := testenv.MetricSum(body, "consul_gateway_controller_informer_secrets_over_cap"); got != 1 {
		t.Errorf("consul_gateway_controller_informer_secrets_over_cap = %v with one Secret past busy's cap, want 1", got)
	}
}

// waitListener waits until the listener (the only one when listener is "") of the
// Gateway namespace/name has ResolvedRefs want, its message holding each of messages.
func waitListener(t *testing.T, namespace, name, want, listener string, messages ...string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("Gateway %s/%s listener %q ResolvedRefs %s", namespace, name, listener, want), func(ctx context.Context) error {
		g, err := env.GatewayClient.GatewayV1().Gateways(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, l := range g.Status.Listeners {
			if listener != "" && string(l.Name) != listener {
				continue
			}
			if got := testenv.ConditionReason(l.Conditions, "ResolvedRefs"); got != want {
				return fmt.Errorf("ResolvedRefs = %q", got)
			}
			message := ""
			for _, c := range l.Conditions {
				if c.Type == "ResolvedRefs" {
					message = c.Message
				}
			}
			for _, m := range messages {
				if !strings.Contains(message, m) {
					return fmt.Errorf("ResolvedRefs message %q lacks %q", message, m)
				}
			}
			return nil
		}
		return fmt.Errorf("no listener %q in %+v", listener, g.Status.Listeners)
	})
}
