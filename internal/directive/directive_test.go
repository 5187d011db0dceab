package directive

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func prefix(match, replacement string) *PathModifier {
	return &PathModifier{Type: ReplacePrefixMatch, Prefix: match, Value: replacement}
}

// Respond answers each case as Gateway API v1.6.3's HTTPRequestRedirectFilter and
// HTTPPathModifier say, and 500 without a redirect.
func TestRespond(t *testing.T) {
	get := func(host, path string) Request { return Request{Scheme: "http", Host: host, Path: path} }
	tests := []struct {
		name string
		d    Directive
		req  Request
		want Answer
	}{
		{"no redirect: 500", Directive{}, get("example.org", "/"), Answer{StatusCode: 500}},
		{"hostname, default 302, path and query kept", Directive{Redirect: &Redirect{Hostname: "example.org"}},
			Request{Host: "a.example.com", Path: "/x/y", RawQuery: "q=1&r=2"}, Answer{302, "http://example.org/x/y?q=1&r=2"}},
		{"status 301", Directive{Redirect: &Redirect{Hostname: "example.org", StatusCode: 301}}, get("a", "/"), Answer{301, "http://example.org/"}},
		{"scheme https: its well-known port, not written", Directive{Redirect: &Redirect{Scheme: "https"}}, get("example.org:8080", "/"),
			Answer{302, "https://example.org/"}},
		{"scheme http from https", Directive{Redirect: &Redirect{Scheme: "http"}}, Request{Scheme: "https", Host: "example.org", Path: "/a"},
			Answer{302, "http://example.org/a"}},
		{"scheme and port", Directive{Redirect: &Redirect{Scheme: "https", Port: 8443}}, get("example.org", "/"), Answer{302, "https://example.org:8443/"}},
		{"port 443 with https is not written", Directive{Redirect: &Redirect{Scheme: "https", Port: 443}}, get("example.org", "/"), Answer{302, "https://example.org/"}},
		{"port 80 with http is not written", Directive{Redirect: &Redirect{Port: 80}}, get("example.org:8080", "/"), Answer{302, "http://example.org/"}},
		{"port without scheme keeps the request's scheme", Directive{Redirect: &Redirect{Port: 8083}}, get("example.org", "/"), Answer{302, "http://example.org:8083/"}},
		{"no scheme, no port: the listener's port, as the Host header names it", Directive{Redirect: &Redirect{Hostname: "b.example.org"}}, get("example.org:8081", "/"),
			Answer{302, "http://b.example.org:8081/"}},
		{"no scheme, no port, no port in Host: the request scheme's", Directive{Redirect: &Redirect{Hostname: "b"}}, Request{Scheme: "https", Host: "a", Path: "/"},
			Answer{302, "https://b/"}},
		{"listener port 443 over https is not written", Directive{Redirect: &Redirect{Hostname: "b"}}, Request{Scheme: "https", Host: "a:443", Path: "/"},
			Answer{302, "https://b/"}},
		{"unknown request scheme is http", Directive{Redirect: &Redirect{}}, Request{Scheme: "gopher", Host: "a", Path: "/"}, Answer{302, "http://a/"}},
		{"IPv6 host keeps its brackets", Directive{Redirect: &Redirect{Scheme: "https"}}, get("[::1]:8080", "/"), Answer{302, "https://[::1]/"}},
		{"full path", Directive{Redirect: &Redirect{Path: &PathModifier{Type: ReplaceFullPath, Value: "/new"}}}, get("a", "/old/x"), Answer{302, "http://a/new"}},
		{"escaped request path stays escaped", Directive{Redirect: &Redirect{Hostname: "b"}}, get("a", "/a%2Fb/%20c"), Answer{302, "http://b/a%2Fb/%20c"}},
		{"empty request path is /", Directive{Redirect: &Redirect{Hostname: "b"}}, get("a", ""), Answer{302, "http://b/"}},
		{"307 and 308", Directive{Redirect: &Redirect{StatusCode: 308}}, get("a", "/"), Answer{308, "http://a/"}},
	}
	// HTTPPathModifier's ReplacePrefixMatch table, row by row.
	for _, row := range []struct{ path, match, replacement, want string }{
		{"/foo/bar", "/foo", "/xyz", "/xyz/bar"},
		{"/foo/bar", "/foo", "/xyz/", "/xyz/bar"},
		{"/foo/bar", "/foo/", "/xyz", "/xyz/bar"},
		{"/foo/bar", "/foo/", "/xyz/", "/xyz/bar"},
		{"/foo", "/foo", "/xyz", "/xyz"},
		{"/foo/", "/foo", "/xyz", "/xyz/"},
		{"/foo/bar", "/foo", "", "/bar"},
		{"/foo/", "/foo", "", "/"},
		{"/foo", "/foo", "", "/"},
		{"/foo/", "/foo", "/", "/"},
		{"/foo", "/foo", "/", "/"},
		// Beyond the table: the root prefix, and a path the prefix does not match
		// (a request the rule never sends), left as it is under the replacement.
		{"/foo/bar", "/", "/xyz", "/xyz/foo/bar"},
		{"/foobar", "/foo", "/xyz", "/xyz/foobar"},
	} {
		tests = append(tests, struct {
			name string
			d    Directive
			req  Request
			want Answer
		}{"prefix " + row.match + " to " + row.replacement + " on " + row.path,
			Directive{Redirect: &Redirect{Path: prefix(row.match, row.replacement)}}, get("a", row.path), Answer{302, "http://a" + row.want}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Respond(tt.d, tt.req)); diff != "" {
				t.Errorf("Respond (-want +got):\n%s", diff)
			}
		})
	}
}

// What Encode writes, Decode reads back; an empty value is the 500 directive.
func TestEncodeDecode(t *testing.T) {
	for _, d := range []Directive{
		{},
		{Redirect: &Redirect{Scheme: "https", Hostname: "example.org", Port: 8443, StatusCode: 301, Path: prefix("/a", "/b")}},
		{Redirect: &Redirect{Path: &PathModifier{Type: ReplaceFullPath, Value: "/a;b=c&d%20"}}},
	} {
		got, err := Decode(Encode(d))
		if err != nil {
			t.Fatalf("Decode(Encode(%+v)): %v", d, err)
		}
		if diff := cmp.Diff(d, got); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	}
	if d, err := Decode(""); err != nil || d.Redirect != nil {
		t.Errorf("Decode(\"\") = %+v, %v; want the 500 directive", d, err)
	}
}

// A value the translation never writes is an error, so the responder answers 500
// rather than redirect somewhere nobody configured.
func TestDecodeRefuses(t *testing.T) {
	for _, value := range []string{
		`not json`,
		`{"redirect":{"scheme":"ftp"}}`,
		`{"redirect":{"statusCode":200}}`,
		`{"redirect":{"port":70000}}`,
		`{"redirect":{"path":{"type":"Regex","value":"/"}}}`,
		`{"redirect":{},"unknown":1}`,
	} {
		d, err := Decode(value)
		if err == nil {
			t.Errorf("Decode(%s) accepted it", value)
		}
		if d.Redirect != nil {
			t.Errorf("Decode(%s) = %+v, want the 500 directive", value, d)
		}
	}
}
