package envoy

import (
	"errors"
	"math/rand/v2"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/google/go-cmp/cmp"
)

func seeded() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }

func toRoute(cluster string) *routev3.Route {
	return prefixRoute("/", cluster)
}

// Virtual host selection, from the VirtualHost.domains documentation: exact names
// first, then suffix wildcards longest first, then prefix wildcards, then "*"; the Host
// header's port is part of the name unless the configuration says to ignore it.
func TestServeHTTPVirtualHost(t *testing.T) {
	rc := func() *routev3.RouteConfiguration {
		return &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{
			vhost("exact", []string{"www.example.com", "port.example.com:8080"}, toRoute("exact")),
			vhost("suffix", []string{"*.example.com"}, toRoute("suffix")),
			vhost("longer-suffix", []string{"*-api.example.com"}, toRoute("longer-suffix")),
			vhost("prefix", []string{"www.*"}, toRoute("prefix")),
			vhost("default", []string{"*"}, toRoute("default")),
		}}
	}
	clusters := []string{"exact", "suffix", "longer-suffix", "prefix", "default"}
	tests := []struct {
		name, host string
		ignorePort bool
		stripAny   bool
		want       string
	}{
		{name: "exact", host: "www.example.com", want: "exact"},
		{name: "exact, case-insensitive", host: "WWW.Example.COM", want: "exact"},
		{name: "host:port domain", host: "port.example.com:8080", want: "exact"},
		{name: "host:port domain needs the port", host: "port.example.com", want: "suffix"},
		// The port is part of the name: no exact or suffix match, but "www.*".
		{name: "a port makes another name", host: "www.example.com:80", want: "prefix"},
		{name: "longest suffix wildcard", host: "x-api.example.com", want: "longer-suffix"},
		{name: "wildcard needs a non-empty part", host: ".example.com", want: "default"},
		{name: "suffix before prefix wildcard", host: "www.b.example.com", want: "suffix"},
		{name: "prefix wildcard", host: "www.example.org", want: "prefix"},
		{name: "default", host: "other.org", want: "default"},
		{name: "ignore_port_in_host_matching", host: "www.example.com:9999", ignorePort: true, want: "exact"},
		{name: "strip_any_host_port", host: "www.example.com:9999", stripAny: true, want: "exact"},
		{name: "IPv6 literal keeps its colons", host: "[::1]", ignorePort: true, want: "default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rc()
			r.IgnorePortInHostMatching = tt.ignorePort
			c := httpConfig(t, r, clusters...)
			if tt.stripAny {
				c.Listeners["http"] = listener(t, "http", 80, chain(t, hcm(t, "80", func(h *hcmv3.HttpConnectionManager) {
					h.StripPortMode = &hcmv3.HttpConnectionManager_StripAnyHostPort{StripAnyHostPort: true}
				}), false))
			}
			got, err := ServeHTTP(c, HTTPRequest{Port: 80, Host: tt.host, Target: "/"}, seeded())
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != 200 || got.Cluster != tt.want {
				t.Errorf("status %d cluster %q, want 200 %q", got.Status, got.Cluster, tt.want)
			}
		})
	}
}

func TestServeHTTPStatuses(t *testing.T) {
	onlyExact := &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{vhost("a", []string{"a.example.com"}, prefixRoute("/a", "a"), prefixRoute("/gone", "gone"))}}
	tests := []struct {
		name string
		req  HTTPRequest
		want int
	}{
		{"routed", HTTPRequest{Port: 80, Host: "a.example.com", Target: "/a"}, 200},
		{"no virtual host", HTTPRequest{Port: 80, Host: "b.example.com", Target: "/a"}, 404},
		{"no route", HTTPRequest{Port: 80, Host: "a.example.com", Target: "/b"}, 404},
		{"no Host header", HTTPRequest{Port: 80, Target: "/a"}, 400},
		// RDS does not validate clusters by default: the router answers 503.
		{"unknown cluster", HTTPRequest{Port: 80, Host: "a.example.com", Target: "/gone"}, 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ServeHTTP(httpConfig(t, onlyExact, "a"), tt.req, seeded())
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tt.want {
				t.Errorf("status %d, want %d", got.Status, tt.want)
			}
		})
	}
}

func TestServeHTTPClusterNotFoundResponseCode(t *testing.T) {
	r := prefixRoute("/", "gone")
	r.GetRoute().ClusterNotFoundResponseCode = routev3.RouteAction_NOT_FOUND
	c := httpConfig(t, &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{vhost("a", []string{"*"}, r)}})
	got, err := ServeHTTP(c, HTTPRequest{Port: 80, Host: "x", Target: "/"}, seeded())
	if err != nil || got.Status != 404 || got.Endpoint != "" {
		t.Errorf("got %+v, %v; want 404 without endpoint", got, err)
	}
}

func TestServeHTTPConnectionErrors(t *testing.T) {
	c := httpConfig(t, &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{vhost("a", []string{"*"}, toRoute("a"))}}, "a")
	c.Listeners["https"] = listener(t, "https", 443, chain(t, hcm(t, "80"), true, "secure.example.com"))
	tests := []struct {
		name string
		req  HTTPRequest
		want error
	}{
		{"no listener", HTTPRequest{Port: 81, Host: "x", Target: "/"}, ErrConnectionRefused},
		{"TLS to a plaintext listener", HTTPRequest{Port: 80, SNI: "x", Host: "x", Target: "/"}, ErrConnectionReset},
		{"plaintext to a TLS listener", HTTPRequest{Port: 443, Host: "secure.example.com", Target: "/"}, ErrConnectionReset},
		{"unknown server name", HTTPRequest{Port: 443, SNI: "other.example.com", Host: "x", Target: "/"}, ErrConnectionReset},
		{"known server name", HTTPRequest{Port: 443, SNI: "SECURE.example.com", Host: "x", Target: "/"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ServeHTTP(c, tt.req, seeded())
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("error %v, want %v", err, tt.want)
			}
		})
	}
}

// Filter chain selection by server name, from FilterChainMatch's documentation: the
// exact name, then wildcards from the most specific, then chains without server names.
func TestServeTCPFilterChainBySNI(t *testing.T) {
	c := config("exact", "wildcard", "deeper", "any")
	c.Listeners["tls"] = listener(t, "tls", 443,
		chain(t, tcpFilter(t, "exact"), true, "a.example.com"),
		chain(t, tcpFilter(t, "wildcard"), true, "*.example.com"),
		chain(t, tcpFilter(t, "deeper"), true, "*.b.example.com"),
		chain(t, tcpFilter(t, "any"), true),
	)
	c.Listeners["strict"] = listener(t, "strict", 8443, chain(t, tcpFilter(t, "exact"), true, "a.example.com"))
	tests := []struct {
		port    uint32
		sni     string
		want    string
		wantErr error
	}{
		{443, "a.example.com", "exact", nil},
		{443, "c.example.com", "wildcard", nil},
		{443, "x.b.example.com", "deeper", nil},
		{443, "x.y.example.com", "wildcard", nil},
		{443, "example.com", "any", nil},
		{8443, "c.example.com", "", ErrConnectionReset},
		{8443, "", "", ErrConnectionReset},
	}
	for _, tt := range tests {
		t.Run(tt.sni, func(t *testing.T) {
			cluster, endpoint, err := ServeTCP(c, tt.port, tt.sni, seeded())
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			if cluster != tt.want || (err == nil && endpoint == "") {
				t.Errorf("cluster %q endpoint %q, want %q", cluster, endpoint, tt.want)
			}
		})
	}
}

func TestServeTCPUnknownCluster(t *testing.T) {
	c := config()
	c.Listeners["tcp"] = listener(t, "tcp", 5432, chain(t, tcpFilter(t, "gone"), false))
	if _, _, err := ServeTCP(c, 5432, "", seeded()); !errors.Is(err, ErrConnectionReset) {
		t.Errorf("error %v, want a reset connection", err)
	}
}

func TestServeHTTPRefusesWhatItDoesNotModel(t *testing.T) {
	redirect := &routev3.Route{Match: prefixRoute("/", "").GetMatch(), Action: &routev3.Route_Redirect{Redirect: &routev3.RedirectAction{}}}
	c := httpConfig(t, &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{vhost("a", []string{"*"}, redirect)}})
	if _, err := ServeHTTP(c, HTTPRequest{Port: 80, Host: "x", Target: "/"}, seeded()); !errors.Is(err, ErrNotModelled) {
		t.Errorf("redirect: error %v, want ErrNotModelled", err)
	}
}

func TestServeHTTPDirectResponse(t *testing.T) {
	r := &routev3.Route{Match: prefixRoute("/", "").GetMatch(), Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{
		Status: 418, Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "teapot"}},
	}}, ResponseHeadersToAdd: []*corev3.HeaderValueOption{header("x-why", "tea", false)}}
	c := httpConfig(t, &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{vhost("a", []string{"*"}, r)}})
	got, err := ServeHTTP(c, HTTPRequest{Port: 80, Host: "x", Target: "/"}, seeded())
	if err != nil {
		t.Fatal(err)
	}
	want := HTTPAnswer{Status: 418, Body: "teapot", ResponseHeaders: map[string][]string{"x-why": {"tea"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
