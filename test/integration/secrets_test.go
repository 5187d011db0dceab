package integration

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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
// it runs: every Secret it lists or watches, as a proxy in front of the API server
// sees its requests, is the one a listener names, and what the API server sends it of
// Secrets is a fraction of one unrelated Secret's size; its resident memory does not
// follow the Secrets; its cache gauges say the same; the Gateway is programmed, a
// rotation of the named Secret reaches Consul's inline-certificate entry, and deleting
// the Gateway drops the Secret from the cache.
func TestSecretCacheHoldsOnlyReferencedSecrets(t *testing.T) {
	s := newConsulStack(t, "secret-cache")
	other := env.NewNamespace(t, "secret-cache-unrelated")
	bulk := bulkKubeClient(t)
	_, key := s.secureGateway(t)
	createUnrelatedTLSSecrets(t, bulk, []string{s.Namespace, other}, 0, unrelatedSecrets/2)

	proxy := startSecretRequestProxy(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.Kube.WriteKubeconfig(kubeconfig, testenv.AdminUser); err != nil {
		t.Fatal(err)
	}
	throughProxy(t, kubeconfig, proxy.Server)
	p := env.RunController(t, testenv.ControllerOptions{Name: "secret-cache", Kubeconfig: kubeconfig, Args: []string{
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
	// The named Secret's rotation below is the marker: once Consul holds the rotated
	// certificate, the controller's Secret watch delivered an event created after
	// every unrelated Secret, so a watch that took them would have delivered them too.
	wantSecretGauges(t, p, 1, "after 1,000 more unrelated ones")

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
	after, err := p.Memory()
	if err != nil {
		t.Fatal(err)
	}
	createdWhileRunning := int64(unrelatedSecrets/2) * 2 * unrelatedSecretSize
	t.Logf("RSS %d MiB before and %d MiB after %d MiB of unrelated Secrets were created", before.RSS>>20, after.RSS>>20, createdWhileRunning>>20)
	if grown := after.RSS - before.RSS; grown > createdWhileRunning/4 {
		t.Errorf("RSS grew by %d MiB while %d MiB of unrelated Secrets were created", grown>>20, createdWhileRunning>>20)
	}
	proxy.check(t, s.Namespace, "tls")

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

// secretRequestProxy forwards a controller's requests to the API server and records
// those that read Secrets, with how many bytes the API server answered each with: the
// API server's side of what the controller's Secret cache holds, apart from the
// controller's own gauges.
type secretRequestProxy struct {
	*httptest.Server
	mu       sync.Mutex
	requests []secretRequest
}

type secretRequest struct {
	path, fieldSelector string
	watch               bool
	bytes               *atomic.Int64
}

func startSecretRequestProxy(t *testing.T) *secretRequestProxy {
	t.Helper()
	reverse := kubeReverseProxy(t)
	p := &secretRequestProxy{}
	p.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet || !strings.Contains(req.URL.Path, "/secrets") {
			reverse.ServeHTTP(w, req)
			return
		}
		r := secretRequest{path: req.URL.Path, fieldSelector: req.URL.Query().Get("fieldSelector"), watch: req.URL.Query().Get("watch") == "true", bytes: &atomic.Int64{}}
		p.mu.Lock()
		p.requests = append(p.requests, r)
		p.mu.Unlock()
		reverse.ServeHTTP(countingWriter{ResponseWriter: w, n: r.bytes}, req)
	}))
	t.Cleanup(func() {
		p.CloseClientConnections() // open watches, or Close waits for them
		p.Close()
	})
	return p
}

// check fails t unless the controller watched Secrets, each read
// named the Secret ns/name and no other, and all of them together brought it less
// than one unrelated Secret's size.
func (p *secretRequestProxy) check(t *testing.T, ns, name string) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	var lists, watches, total int64
	for _, r := range p.requests {
		named := r.path == "/api/v1/namespaces/"+ns+"/secrets/"+name ||
			(r.path == "/api/v1/namespaces/"+ns+"/secrets" && strings.Contains(r.fieldSelector, "metadata.name="+name))
		if !named {
			t.Errorf("the controller read Secrets other than %s/%s: GET %s fieldSelector=%q watch=%t", ns, name, r.path, r.fieldSelector, r.watch)
		}
		if r.watch {
			watches++
		} else {
			lists++
		}
		total += r.bytes.Load()
	}
	t.Logf("Secret reads through the proxy: %d lists or gets, %d watches, %d bytes", lists, watches, total)
	// A watch either way: informers list then watch, or stream the list in the watch.
	if watches == 0 {
		t.Errorf("the controller made %d Secret lists and no watch through the proxy: it read the named Secret some other way", lists)
	}
	if total >= unrelatedSecretSize {
		t.Errorf("the API server sent the controller %d bytes of Secrets, more than one unrelated Secret's %d", total, unrelatedSecretSize)
	}
}

// countingWriter counts the bytes of a response, streamed ones included.
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c countingWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.n.Add(int64(n))
	return n, err
}

func (c countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
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
