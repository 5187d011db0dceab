package sync

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Envoy picks a virtual host by the Host header: the exact domain, then the longest
// wildcard suffix, then "*".
func TestVirtualHost(t *testing.T) {
	t.Parallel()
	table := listenerTable{routes: []attachedRoute{
		{consulHosts: []string{anyHost}},
		{consulHosts: []string{"*.example.com"}},
		{consulHosts: []string{"*.a.example.com", "b.a.example.com"}},
	}}
	for host, want := range map[string]string{
		"b.a.example.com": "b.a.example.com",
		"c.a.example.com": "*.a.example.com",
		"a.example.com":   "*.example.com",
		"example.com":     anyHost,
	} {
		if got, ok := table.virtualHost(host); !ok || got != want {
			t.Errorf("virtual host of %s = %q (%v), want %q", host, got, ok, want)
		}
	}
	if got, ok := (&listenerTable{routes: []attachedRoute{{consulHosts: []string{"a.example.com"}}}}).virtualHost("b.example.com"); ok {
		t.Errorf("virtual host of b.example.com = %q, want none", got)
	}
}

// requestsOf combines two matches only where one request can satisfy both.
func TestRequestsOf(t *testing.T) {
	t.Parallel()
	exact := gatewayv1.PathMatchExact
	match := func(path string, pathType *gatewayv1.PathMatchType, method string, headers map[string]string) routeMatch {
		m := gatewayv1.HTTPRouteMatch{Path: &gatewayv1.HTTPPathMatch{Type: pathType, Value: &path}}
		if method != "" {
			m.Method = ptrTo(gatewayv1.HTTPMethod(method))
		}
		for name, value := range headers {
			m.Headers = append(m.Headers, gatewayv1.HTTPHeaderMatch{Name: gatewayv1.HTTPHeaderName(name), Value: value})
		}
		return newRouteMatch(m)
	}
	tests := []struct {
		name     string
		m, other routeMatch
		want     []string
	}{
		{"a prefix and a longer prefix under it", match("/a", nil, "", nil), match("/a/b", nil, "", nil),
			[]string{"GET /a", "GET /a/x", "GET /a/b", "GET /a/b/x"}},
		{"an exact path and a header of the other", match("/p", &exact, "", nil), match("/p", nil, "", map[string]string{"X-Canary": "1"}),
			[]string{"GET /p (x-canary: 1)"}},
		{"different methods never meet", match("/p", nil, "GET", nil), match("/p", nil, "POST", nil), nil},
		{"different header values never meet", match("/p", nil, "", map[string]string{"x-env": "a"}), match("/p", nil, "", map[string]string{"X-Env": "b"}), nil},
		{"a method of the other", match("/p", nil, "", nil), match("/", nil, "PUT", nil), []string{"PUT /p", "PUT /p/x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, r := range requestsOf(tt.m, tt.other) {
				got = append(got, r.String())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExampleRequestShown: a request shows its own values and withholds those of
// another namespace's route; a request made up from the judged route's namespace too
// withholds nothing.
func TestExampleRequestShown(t *testing.T) {
	t.Parallel()
	r := exampleRequest{host: "a.example", path: "/m/admin", headers: map[string]string{"x-own": "1", "x-key": "hunter2"}, query: map[string]string{"token": "s3cr3t"}}
	foreign := r
	foreign.withheld = map[string]bool{"path": true, "header:x-key": true, "query:token": true}
	tests := []struct {
		name string
		add  []exampleRequest
		want string
	}{
		{"own values", []exampleRequest{r}, "GET a.example/m/admin?token=s3cr3t (x-key: hunter2) (x-own: 1)"},
		{"another namespace's values", []exampleRequest{foreign}, "GET a.example/... (x-own: 1) with 2 header or query values of another namespace's route"},
		{"made up from both", []exampleRequest{foreign, r}, "GET a.example/m/admin?token=s3cr3t (x-key: hunter2) (x-own: 1)"},
	}
	for _, tt := range tests {
		set := exampleSet{seen: map[string]int{}}
		for _, r := range tt.add {
			set.add(r)
		}
		if len(set.list) != 1 {
			t.Fatalf("%s: %d requests, want 1", tt.name, len(set.list))
		}
		if diff := cmp.Diff(tt.want, set.list[0].shown()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}
