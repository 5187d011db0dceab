package responder

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/klog/v2"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/directive"
)

// Config is what a responder needs.
type Config struct {
	// Client talks to a Consul agent's HTTP API with a token that may write Service
	// (service:write on it: the leaf, authorize and registration all need it).
	Client *consulapi.Client
	// Service is the responder's Consul service name: its identity, the destination of
	// the intentions that let gateways reach it, and the name the routes send to.
	Service string
	// Namespace and Partition are the service's, on Consul Enterprise; "" on CE.
	Namespace string
	Partition string
}

// Server is a responder.
type Server struct {
	cfg Config
	id  identity
}

// New returns a responder; nothing talks to Consul until Run or Serve.
func New(cfg Config) *Server {
	return &Server{cfg: cfg}
}

// FollowIdentity reads the responder's leaf certificate and Consul's roots, and
// follows their changes, until ctx is done.
func (s *Server) FollowIdentity(ctx context.Context) {
	agent := s.cfg.Client.Agent()
	done := make(chan struct{})
	go func() {
		defer close(done)
		follow(ctx, "CA roots", s.id.readRoots(agent))
	}()
	follow(ctx, "leaf certificate", s.id.readLeaf(agent, s.cfg.Service))
	<-done
}

// Ready returns nil once the responder has its certificate and roots.
func (s *Server) Ready() error { return s.id.ready() }

// shutdownGrace is how long a stopping responder lets requests in flight finish.
const shutdownGrace = 5 * time.Second

// Serve answers mTLS connections on l until ctx is done. Connections made before
// the responder has its identity fail their handshake.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	logger := klog.FromContext(ctx)
	srv := &http.Server{
		Handler:           s.Handler(),
		TLSConfig:         s.TLSConfig(ctx),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		// Refused handshakes are logged by authorize; what the server logs besides
		// goes to klog.
		ErrorLog: log.New(klogWriter{logger}, "", 0),
	}
	stopped := make(chan error, 1)
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		defer cancel()
		stopped <- srv.Shutdown(shutdown)
	}()
	logger.Info("Serving", "address", l.Addr().String(), "service", s.cfg.Service)
	if err := srv.ServeTLS(l, "", ""); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve on %s: %w", l.Addr(), err)
	}
	return <-stopped
}

// klogWriter writes the HTTP server's own log lines at verbosity 4: handshake
// failures, which authorize already logged with their reason, are most of them.
type klogWriter struct{ logger klog.Logger }

func (w klogWriter) Write(p []byte) (int, error) {
	w.logger.V(4).Info("HTTP server", "msg", strings.TrimSpace(string(p)))
	return len(p), nil
}

// TLSConfig is the responder's server side of mTLS: its current leaf, a client
// certificate required and signed by Consul's current roots, and the caller's
// service allowed by Consul's intentions. A caller that is refused fails its
// handshake: it never reaches the handler.
func (s *Server) TLSConfig(ctx context.Context) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if cert := s.id.cert.Load(); cert != nil {
				return cert, nil
			}
			return nil, errors.New("responder has no leaf certificate yet")
		},
		// The chain is verified in VerifyConnection against the roots Consul gives
		// now, which a static ClientCAs could not follow.
		ClientAuth: tls.RequireAnyClientCert,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return s.authorize(ctx, cs)
		},
	}
}

// authorize checks the caller of a connection: its certificate chain against
// Consul's roots, and its SPIFFE ID against the intentions to the responder.
func (s *Server) authorize(ctx context.Context, cs tls.ConnectionState) error {
	logger := klog.FromContext(ctx)
	uri, err := s.verifyChain(cs.PeerCertificates)
	if err != nil {
		logger.V(2).Info("Refused a connection", "reason", err)
		return err
	}
	answer, err := s.cfg.Client.Agent().ConnectAuthorize(&consulapi.AgentAuthorizeParams{
		Target:           s.cfg.Service,
		ClientCertURI:    uri,
		ClientCertSerial: serial(cs.PeerCertificates[0]),
	})
	if err != nil {
		logger.Error(err, "Could not ask Consul whether a caller is allowed; refusing it", "caller", uri)
		return fmt.Errorf("authorize %s: %w", uri, err)
	}
	if !answer.Authorized {
		logger.V(2).Info("Refused a caller Consul's intentions deny", "caller", uri, "reason", answer.Reason)
		return fmt.Errorf("%s may not reach %s: %s", uri, s.cfg.Service, answer.Reason)
	}
	logger.V(4).Info("Accepted a caller", "caller", uri, "reason", answer.Reason)
	return nil
}

// verifyChain verifies a client's certificate chain against Consul's current roots
// and returns its SPIFFE ID.
func (s *Server) verifyChain(chain []*x509.Certificate) (string, error) {
	roots := s.id.roots.Load()
	if roots == nil {
		return "", errors.New("responder has no CA roots yet")
	}
	if len(chain) == 0 {
		return "", errors.New("no client certificate")
	}
	intermediates := x509.NewCertPool()
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	if _, err := chain[0].Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: intermediates,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return "", fmt.Errorf("client certificate: %w", err)
	}
	for _, uri := range chain[0].URIs {
		if uri.Scheme == "spiffe" {
			return uri.String(), nil
		}
	}
	return "", errors.New("client certificate has no SPIFFE ID")
}

// serial is a certificate's serial number as Consul writes it: hex bytes joined
// by colons.
func serial(c *x509.Certificate) string {
	b := c.SerialNumber.Bytes()
	parts := make([]string, len(b))
	for i, v := range b {
		parts[i] = fmt.Sprintf("%02x", v)
	}
	return strings.Join(parts, ":")
}

// Handler answers every request with what its directive says: 500 without one, or
// with one that cannot be read.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		logger := klog.FromContext(r.Context())
		d, err := directive.Decode(r.Header.Get(directive.Header))
		if err != nil {
			logger.V(2).Info("Unreadable directive; answering 500", "err", err)
		}
		answer := directive.Respond(d, requestOf(r))
		if answer.Location != "" {
			w.Header().Set("Location", answer.Location)
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(answer.StatusCode)
		if r.Method != http.MethodHead {
			_, _ = fmt.Fprintln(w, http.StatusText(answer.StatusCode))
		}
	})
}

// requestOf is what of r the answer depends on. The scheme is the one the client used
// with the gateway, which Envoy sets in X-Forwarded-Proto; r's own TLS is the mesh's.
func requestOf(r *http.Request) directive.Request {
	return directive.Request{
		Scheme:   r.Header.Get("X-Forwarded-Proto"),
		Host:     r.Host,
		Path:     r.URL.EscapedPath(),
		RawQuery: r.URL.RawQuery,
	}
}
