package integration

import (
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// How a controller process reaches the API server in the deploy and failover tests:
// with a ServiceAccount's token, and through a proxy of the test's.

// serviceAccountKubeconfig writes a kubeconfig holding a TokenRequest token of the
// ServiceAccount namespace/name, as a pod of it would get, and returns its path and
// the token. via, when set, is a proxy (startWatchListOffProxy) to reach the API
// server through.
func serviceAccountKubeconfig(t *testing.T, namespace, name string, via *watchListOffProxy) (path, token string) {
	t.Helper()
	tr, err := env.KubeClient.CoreV1().ServiceAccounts(namespace).CreateToken(t.Context(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", namespace, name, err)
	}
	path = filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.Kube.WriteTokenKubeconfig(path, name, tr.Status.Token); err != nil {
		t.Fatal(err)
	}
	if via != nil {
		throughProxy(t, path, via.Server)
	}
	return path, tr.Status.Token
}

// throughProxy points the kubeconfig at path at proxy, a TLS server with a
// certificate of its own, instead of the API server.
func throughProxy(t *testing.T, path string, proxy *httptest.Server) {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	proxyCA := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: proxy.Certificate().Raw})
	for _, cluster := range cfg.Clusters {
		cluster.Server, cluster.CertificateAuthority, cluster.CertificateAuthorityData = proxy.URL, "", proxyCA
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
}

// watchListOffProxy serves the API server the way one without WatchList does
// (Kubernetes before 1.34, or with the feature gate off): a watch that asks for its
// initial events is refused, so client-go's informers fall back to LIST and then
// WATCH. Against this test's API server they never list, so only through this proxy
// is a list grant put to the test. It serves https (client-go sends no token over
// http) with a certificate of its own.
type watchListOffProxy struct {
	*httptest.Server
	refused, lists atomic.Int64
}

// kubeReverseProxy forwards to the API server over TLS only; each request carries the
// client's own token.
func kubeReverseProxy(t *testing.T) *httputil.ReverseProxy {
	t.Helper()
	target, err := url.Parse(env.Kube.Host())
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(env.Kube.Config(testenv.AdminUser))
	cfg.BearerToken = ""
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     transport,
		FlushInterval: -1, // watches stream
	}
}

func startWatchListOffProxy(t *testing.T) *watchListOffProxy {
	t.Helper()
	reverse := kubeReverseProxy(t)
	p := &watchListOffProxy{}
	p.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		query := req.URL.Query()
		switch {
		case query.Get("sendInitialEvents") == "true":
			p.refused.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			_ = json.NewEncoder(w).Encode(metav1.Status{
				TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status:   metav1.StatusFailure, Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid,
				Message: "sendInitialEvents is not supported: this API server has no WatchList",
			})
			return
		case req.Method == http.MethodGet && query.Get("watch") != "true" && strings.HasPrefix(req.URL.Path, "/api"):
			p.lists.Add(1) // and gets, which the controller makes only of its Lease
		}
		reverse.ServeHTTP(w, req)
	}))
	t.Cleanup(func() {
		p.CloseClientConnections() // open watches, or Close waits for them
		p.Close()
	})
	return p
}
