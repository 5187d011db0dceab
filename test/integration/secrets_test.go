package integration

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// unrelatedLabel marks the Secrets no listener names, for their cleanup.
const unrelatedLabel = "test.example.com/unrelated"

const (
	// unrelatedSecrets is how many TLS Secrets no listener names the test creates,
	// half before the controller starts and half while it runs.
	unrelatedSecrets = 2000
	// unrelatedSecretSize is the size of each one's tls.crt and of its tls.key.
	unrelatedSecretSize = 32 << 10
)

// TestSecretCacheHoldsOnlyReferencedSecrets runs the controller binary beside 2,000
// large kubernetes.io/tls Secrets that no listener names (128 MiB of key material, in
// the Gateway's namespace and another), half created before it starts and half while
// it runs: its Secret cache holds the one Secret a listener names and no other
// (informer_cached_secrets), its resident memory does not follow the Secrets, the
// Gateway is programmed, a rotation of the named Secret reaches Consul's
// inline-certificate entry, and deleting the Gateway drops the Secret from the cache.
func TestSecretCacheHoldsOnlyReferencedSecrets(t *testing.T) {
	s := newConsulStack(t, "secret-cache")
	other := env.NewNamespace(t, "secret-cache-unrelated")
	bulk := bulkKubeClient(t)
	_, key := s.secureGateway(t)
	createUnrelatedTLSSecrets(t, bulk, []string{s.Namespace, other}, 0, unrelatedSecrets/2)

	p := env.RunController(t, testenv.ControllerOptions{Name: "secret-cache", Args: []string{
		"--controller-name=" + string(s.Controller), "--cluster-id=secret-cache", "--deploy-gateways=false", "--leader-elect=false",
	}})
	if err := p.WaitReady(t.Context(), 60*time.Second); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, "the HTTPS Gateway programmed with its certificate", func(context.Context) error {
		return secureGatewayProgrammed(t, s)
	})
	wantSecretGauges(t, p, 1, "with the named Secret and 1,000 unrelated ones")
	before, err := p.Memory()
	if err != nil {
		t.Fatal(err)
	}

	createUnrelatedTLSSecrets(t, bulk, []string{s.Namespace, other}, unrelatedSecrets/2, unrelatedSecrets)
	// The Secrets are created over seconds: a controller watching them would have
	// received nearly all by now, and the rest within this.
	time.Sleep(time.Second)
	wantSecretGauges(t, p, 1, "after 1,000 more unrelated ones")
	after, err := p.Memory()
	if err != nil {
		t.Fatal(err)
	}
	createdWhileRunning := int64(unrelatedSecrets/2) * 2 * unrelatedSecretSize
	t.Logf("peak RSS %d MiB before and %d MiB after %d MiB of unrelated Secrets were created", before.PeakRSS>>20, after.PeakRSS>>20, createdWhileRunning>>20)
	if grown := after.PeakRSS - before.PeakRSS; grown > createdWhileRunning/2 {
		t.Errorf("peak RSS grew by %d MiB while %d MiB of unrelated Secrets were created", grown>>20, createdWhileRunning>>20)
	}

	// A rotation of the named Secret reaches Consul.
	cert, rotatedKey := testenv.SelfSigned(t, "rotated.example.com")
	testenv.Update(t, env.KubeClient.CoreV1().Secrets(s.Namespace).Get, env.KubeClient.CoreV1().Secrets(s.Namespace).Update, "tls", func(secret *corev1.Secret) {
		secret.Data = map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: rotatedKey}
	})
	certEntry := s.naming.CertificateName(s.Namespace, "tls")
	s.waitEntry(t, consulapi.InlineCertificate, certEntry, "the rotated certificate in Consul", func(e consulapi.ConfigEntry) bool {
		c, ok := e.(*consulapi.InlineCertificateConfigEntry)
		return ok && c.Certificate == string(cert)
	})

	// The Gateway goes: so does its Secret, from the cache and from Consul.
	if err := env.GatewayClient.GatewayV1().Gateways(s.Namespace).Delete(t.Context(), "secure", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 40*time.Second, "the Secret dropped from the cache", func(ctx context.Context) error {
		return secretGauges(ctx, p, 0)
	})
	s.waitEntry(t, consulapi.InlineCertificate, certEntry, "the certificate entry removed", absent)

	out := p.Output()
	if bytes.Contains([]byte(out), key) || bytes.Contains([]byte(out), rotatedKey) {
		t.Error("the log holds a private key")
	}
}

// secureGatewayProgrammed reports why the Gateway "secure" of s is not Programmed with
// its HTTPS listener's certificate resolved, nil when it is.
func secureGatewayProgrammed(t *testing.T, s consulStack) error {
	t.Helper()
	g, err := env.GatewayClient.GatewayV1().Gateways(s.Namespace).Get(t.Context(), "secure", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if got := testenv.ConditionReason(g.Status.Conditions, "Programmed"); got != "True/Programmed" {
		return fmt.Errorf("Gateway secure Programmed = %q", got)
	}
	for _, l := range g.Status.Listeners {
		if l.Name != "https" {
			continue
		}
		if got := testenv.ConditionReason(l.Conditions, "ResolvedRefs"); got != "True/ResolvedRefs" {
			return fmt.Errorf("listener https ResolvedRefs = %q", got)
		}
		return nil
	}
	return fmt.Errorf("no status for listener https in %+v", g.Status.Listeners)
}

// wantSecretGauges fails t unless the controller caches and watches exactly n Secrets.
func wantSecretGauges(t *testing.T, p *testenv.Controller, n float64, when string) {
	t.Helper()
	if err := secretGauges(t.Context(), p, n); err != nil {
		t.Errorf("%s: %v", when, err)
	}
}

// secretGauges reports whether the controller's /metrics says it caches and watches
// exactly n Secrets.
func secretGauges(ctx context.Context, p *testenv.Controller, n float64) error {
	body, err := p.Metrics(ctx)
	if err != nil {
		return err
	}
	for _, name := range []string{"consul_gateway_controller_informer_cached_secrets", "consul_gateway_controller_informer_secret_watches"} {
		if got := testenv.MetricSum(body, name); got != n {
			return fmt.Errorf("%s = %v, want %v", name, got, n)
		}
	}
	return nil
}

// bulkKubeClient is an admin clientset without the harness's client-side rate limit,
// to create thousands of objects in seconds.
func bulkKubeClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(env.Kube.Config(testenv.AdminUser))
	cfg.QPS, cfg.Burst = 1000, 1000
	return kubernetes.NewForConfigOrDie(cfg)
}

// createUnrelatedTLSSecrets creates the TLS Secrets unrelated-<from>..<to-1>, spread
// over namespaces, each with unrelatedSecretSize bytes of filler as its certificate and
// as its key, and deletes them when t ends: the API server keeps them in memory, and
// their namespaces go only later.
func createUnrelatedTLSSecrets(t *testing.T, kube kubernetes.Interface, namespaces []string, from, to int) {
	t.Helper()
	start := time.Now()
	filler := bytes.Repeat([]byte{'x'}, unrelatedSecretSize)
	indexes := make(chan int)
	errs := make(chan error, to-from)
	var workers sync.WaitGroup
	for range 8 {
		workers.Go(func() {
			for i := range indexes {
				ns := namespaces[i%len(namespaces)]
				secret := testenv.TLSSecret(ns, fmt.Sprintf("unrelated-%05d", i), filler, filler)
				secret.Labels = map[string]string{unrelatedLabel: "true"}
				if _, err := kube.CoreV1().Secrets(ns).Create(t.Context(), secret, metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("create Secret %s/%s: %w", ns, secret.Name, err)
				}
			}
		})
	}
	for i := from; i < to; i++ {
		indexes <- i
	}
	close(indexes)
	workers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, ns := range namespaces {
			err := kube.CoreV1().Secrets(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: unrelatedLabel})
			if err != nil {
				t.Logf("delete the unrelated Secrets of %s: %v", ns, err)
			}
		}
	})
	t.Logf("created %d unrelated TLS Secrets of %d KiB in %s", to-from, 2*unrelatedSecretSize>>10, time.Since(start).Round(100*time.Millisecond))
}
