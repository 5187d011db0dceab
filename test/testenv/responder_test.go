package testenv

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// SendUpstream sends the request as the gateway forwards it (method, Host, path with
// its query, every header value) to the endpoint, and hands back the upstream's
// answer: status, headers and body.
func TestSendUpstreamSendsTheForwardedRequest(t *testing.T) {
	type seen struct {
		Method, Host, URI string
		Directive         []string
	}
	var got seen
	upstream := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = seen{Method: r.Method, Host: r.Host, URI: r.RequestURI, Directive: r.Header.Values("X-Directive")}
		w.Header().Set("Location", "http://example.org/")
		w.WriteHeader(http.StatusFound)
		_, _ = io.WriteString(w, "Found\n")
	}))
	t.Cleanup(upstream.Close)
	client := upstream.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	answer, err := SendUpstream(t.Context(), client, UpstreamRequest{
		Endpoint: strings.TrimPrefix(upstream.URL, "https://"),
		Method:   http.MethodPost,
		Host:     "app.example.com",
		Path:     "/old/page?q=1",
		Headers:  map[string][]string{"x-directive": {"a", "b"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := seen{Method: http.MethodPost, Host: "app.example.com", URI: "/old/page?q=1", Directive: []string{"a", "b"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the upstream received (-want +got):\n%s", diff)
	}
	if answer.StatusCode != http.StatusFound || answer.Header.Get("Location") != "http://example.org/" || string(answer.Body) != "Found\n" {
		t.Errorf("answer %d Location %q body %q, want 302 Location http://example.org/ body Found", answer.StatusCode, answer.Header.Get("Location"), answer.Body)
	}
}
