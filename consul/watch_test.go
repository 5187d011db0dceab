package consul

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
)

// A Consul whose certificate the client does not trust stays untrusted for the life of
// the process: reading its verdicts gives up at once instead of retrying until
// verdictsTimeout, so statuses, and the failed writes' ConsulWriteFailed that name the
// certificate, are not held back. Other errors (Consul not up yet) are retried.
func TestReadVerdictsGivesUpOnAnUntrustedCertificate(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("[]"))
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.StartTLS()
	t.Cleanup(srv.Close)
	// No CA: the test server's certificate is signed by none the client trusts.
	untrusting, err := consulapi.NewClient(&consulapi.Config{Address: srv.Listener.Addr().String(), Scheme: "https"})
	if err != nil {
		t.Fatal(err)
	}
	s := NewSyncer(Config{Client: untrusting, Ownership: testOwnership})
	start := time.Now()
	s.readVerdicts(t.Context())
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("reading verdicts from a Consul whose certificate is not trusted took %s; want it to give up at once", took.Round(time.Millisecond))
	}
	if !s.HasSynced() {
		t.Error("HasSynced is false after reading verdicts gave up")
	}

	_, certErr := untrusting.Status().Leader()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	refusing, err := consulapi.NewClient(&consulapi.Config{Address: closed.Listener.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	_, refusedErr := refusing.Status().Leader()
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"an untrusted certificate", certErr, true},
		{"a connection refused", refusedErr, false},
	} {
		if got := isCertificateError(tc.err); got != tc.want {
			t.Errorf("isCertificateError(%s: %v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
