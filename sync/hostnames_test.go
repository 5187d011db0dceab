package sync

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestIntersectHostnames(t *testing.T) {
	type hosts = []gatewayv1.Hostname
	tests := []struct {
		name     string
		listener *gatewayv1.Hostname
		route    hosts
		want     hosts
		wantOK   bool
	}{
		{name: "both empty", wantOK: true},
		{name: "listener hostname set but empty", listener: new(gatewayv1.Hostname("")), wantOK: true},
		{name: "route empty takes precise listener", listener: new(gatewayv1.Hostname("foo.example.com")), want: hosts{"foo.example.com"}, wantOK: true},
		{name: "route empty takes wildcard listener", listener: new(gatewayv1.Hostname("*.example.com")), want: hosts{"*.example.com"}, wantOK: true},
		{name: "listener empty accepts all route hostnames", route: hosts{"foo.example.com", "*.example.net"}, want: hosts{"foo.example.com", "*.example.net"}, wantOK: true},
		{name: "listener empty dedups route hostnames", route: hosts{"a.example.com", "a.example.com"}, want: hosts{"a.example.com"}, wantOK: true},
		{name: "equal precise", listener: new(gatewayv1.Hostname("foo.example.com")), route: hosts{"foo.example.com"}, want: hosts{"foo.example.com"}, wantOK: true},
		{name: "different precise", listener: new(gatewayv1.Hostname("foo.example.com")), route: hosts{"bar.example.com"}, wantOK: false},
		{name: "wildcard listener, one label", listener: new(gatewayv1.Hostname("*.example.com")), route: hosts{"foo.example.com"}, want: hosts{"foo.example.com"}, wantOK: true},
		{name: "wildcard listener, two labels", listener: new(gatewayv1.Hostname("*.example.com")), route: hosts{"foo.bar.example.com"}, want: hosts{"foo.bar.example.com"}, wantOK: true},
		{name: "wildcard listener does not match its apex", listener: new(gatewayv1.Hostname("*.example.com")), route: hosts{"example.com"}, wantOK: false},
		{name: "wildcard listener needs a label boundary", listener: new(gatewayv1.Hostname("*.example.com")), route: hosts{"badexample.com"}, wantOK: false},
		{name: "wildcard listener, other domain", listener: new(gatewayv1.Hostname("*.example.com")), route: hosts{"test.example.net"}, wantOK: false},
		{name: "wildcard route gives precise listener", listener: new(gatewayv1.Hostname("foo.example.com")), route: hosts{"*.example.com"}, want: hosts{"foo.example.com"}, wantOK: true},
		{name: "wildcard route, deeper precise listener", listener: new(gatewayv1.Hostname("a.b.example.com")), route: hosts{"*.example.com"}, want: hosts{"a.b.example.com"}, wantOK: true},
		{name: "wildcard route does not match listener apex", listener: new(gatewayv1.Hostname("example.com")), route: hosts{"*.example.com"}, wantOK: false},
		{name: "equal wildcards", listener: new(gatewayv1.Hostname("*.example.com")), route: hosts{"*.example.com"}, want: hosts{"*.example.com"}, wantOK: true},
		{name: "narrower wildcard route", listener: new(gatewayv1.Hostname("*.example.com")), route: hosts{"*.foo.example.com"}, want: hosts{"*.foo.example.com"}, wantOK: true},
		{name: "narrower wildcard listener", listener: new(gatewayv1.Hostname("*.foo.example.com")), route: hosts{"*.example.com"}, want: hosts{"*.foo.example.com"}, wantOK: true},
		{name: "disjoint wildcards", listener: new(gatewayv1.Hostname("*.example.com")), route: hosts{"*.example.net"}, wantOK: false},
		{
			name:     "non-matching route hostnames are dropped, order kept",
			listener: new(gatewayv1.Hostname("*.example.com")),
			route:    hosts{"test.example.net", "b.example.com", "a.example.com", "example.com"},
			want:     hosts{"b.example.com", "a.example.com"},
			wantOK:   true,
		},
		{
			name:     "intersections that collapse to one hostname are deduplicated",
			listener: new(gatewayv1.Hostname("foo.example.com")),
			route:    hosts{"*.example.com", "foo.example.com", "*.foo.example.com"},
			want:     hosts{"foo.example.com"},
			wantOK:   true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := intersectHostnames(tt.listener, tt.route)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("hosts (-want +got):\n%s", diff)
			}
			if ok != tt.wantOK {
				t.Errorf("ok = %v, want %v", ok, tt.wantOK)
			}
		})
	}
}

func TestIPHostnames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		hosts []gatewayv1.Hostname
		want  []gatewayv1.Hostname
	}{
		{nil, nil},
		{[]gatewayv1.Hostname{"a.example.com", "*.example.com", "1.2.3", "1-2-3-4.example.com"}, nil},
		{[]gatewayv1.Hostname{"a.example.com", "10.1.2.3", "255.255.255.255"}, []gatewayv1.Hostname{"10.1.2.3", "255.255.255.255"}},
		// The CRD's pattern refuses these, but the check does not depend on it.
		{[]gatewayv1.Hostname{"::1", "2001:db8::1"}, []gatewayv1.Hostname{"::1", "2001:db8::1"}},
	}
	for _, tt := range tests {
		if got := ipHostnames(tt.hosts); !cmp.Equal(tt.want, got) {
			t.Errorf("ipHostnames(%v) = %v, want %v", tt.hosts, got, tt.want)
		}
	}
}
