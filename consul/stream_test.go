package consul_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/options"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// Against a real Consul with TLS and ACLs, reached as the controller reaches it
// (options.ConsulConnection with its token file and CA), a list through an EntryLister
// is decoded by the streaming transport while the answer is read: the body is read to
// its end before the transport returns, consul/api gets the empty answer, and the
// entries equal consul/api's own List. A blocking list waits as before, and a request
// that is not a list is left to consul/api.
func TestStreamListAnswers(t *testing.T) {
	dir := t.TempDir()
	agent, admin := testenv.StartConsulFor(t, dir, testenv.ConsulOptions{ACL: true, TLS: true})
	ca, token := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "token")
	if err := os.WriteFile(ca, agent.CACertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(token, []byte(agent.ManagementToken()), 0o600); err != nil {
		t.Fatal(err)
	}
	var streamed, unread atomic.Int32
	bodies := &bodyEnds{}
	client, err := options.ConsulConnection{HTTPAddr: agent.URL(), CACert: ca, TokenFile: token}.Client(
		func(next http.RoundTripper) http.RoundTripper { bodies.next = next; return bodies },
		consul.StreamListAnswers,
		func(next http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(req *http.Request) (*http.Response, error) {
				resp, err := next.RoundTrip(req)
				if err != nil || resp.Body == io.ReadCloser(bodies.last) {
					return resp, err // left to consul/api
				}
				streamed.Add(1)
				if !bodies.last.eof {
					unread.Add(1)
				}
				return resp, nil
			})
		})
	if err != nil {
		t.Fatal(err)
	}

	const routes = 200
	for i := range routes {
		route := &consulapi.HTTPRouteConfigEntry{Kind: consulapi.HTTPRoute, Name: fmt.Sprintf("route-%03d", i),
			Parents:   []consulapi.ResourceReference{{Kind: consulapi.APIGateway, Name: "gw", SectionName: "http"}},
			Rules:     []consulapi.HTTPRouteRule{{Matches: []consulapi.HTTPMatch{{Path: consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchPrefix, Value: fmt.Sprintf("/r%d", i)}}}, Services: []consulapi.HTTPService{{Name: "echo", Weight: 1}}}},
			Hostnames: []string{fmt.Sprintf("r%d.example.com", i)},
			Meta:      map[string]string{"quote": `a "quoted", [bracketed] value`},
		}
		if _, _, err := admin.ConfigEntries().Set(consul.Compact(route), nil); err != nil {
			t.Fatal(err)
		}
	}
	lister := consul.NewEntryLister(client, consulapi.HTTPRoute)
	got, meta, size, err := lister.List(&consulapi.QueryOptions{RequireConsistent: true})
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := admin.ConfigEntries().List(consulapi.HTTPRoute, &consulapi.QueryOptions{RequireConsistent: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != routes {
		t.Fatalf("listed %d routes, want %d", len(got), routes)
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("streamed entries differ from consul/api's (-want +got):\n%s", diff)
	}
	if streamed.Load() != 1 || size < routes*200 {
		t.Errorf("streamed answers %d, %d bytes read; want 1, at least %d", streamed.Load(), size, routes*200)
	}

	// A blocking list returns with the change it waited for.
	go func() {
		time.Sleep(200 * time.Millisecond)
		_, _ = admin.ConfigEntries().Delete(consulapi.HTTPRoute, "route-000", nil)
	}()
	got, _, _, err = lister.List(&consulapi.QueryOptions{WaitIndex: meta.LastIndex, WaitTime: 10 * time.Second})
	if err != nil || len(got) != routes-1 {
		t.Fatalf("blocking list: %d routes, %v; want %d", len(got), err, routes-1)
	}
	// Anything else is consul/api's to read.
	entry, _, err := client.ConfigEntries().Get(consulapi.HTTPRoute, "route-001", nil)
	if err != nil || entry.GetName() != "route-001" {
		t.Fatalf("get: %v, %v", entry, err)
	}
	if streamed.Load() != 2 || unread.Load() != 0 {
		t.Errorf("streamed answers %d, of which %d not read to their end before consul/api got them; want 2 (the get read by consul/api), 0", streamed.Load(), unread.Load())
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// bodyEnds wraps each response body in an endRecorder, and keeps the last. The test
// makes one request at a time.
type bodyEnds struct {
	next http.RoundTripper
	last *endRecorder
}

func (b *bodyEnds) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.next.RoundTrip(req)
	if err == nil {
		b.last = &endRecorder{ReadCloser: resp.Body}
		resp.Body = b.last
	}
	return resp, err
}

// endRecorder records whether its body was read to its end.
type endRecorder struct {
	io.ReadCloser
	eof bool
}

func (e *endRecorder) Read(p []byte) (int, error) {
	n, err := e.ReadCloser.Read(p)
	if err == io.EOF {
		e.eof = true
	}
	return n, err
}
