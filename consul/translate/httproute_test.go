package translate

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestBackendWeight(t *testing.T) {
	for _, tt := range []struct {
		w    *int32
		want int
	}{{nil, 1}, {new(int32(0)), 0}, {new(int32(7)), 7}, {new(int32(-1)), 0}} {
		if got := backendWeight(tt.w); got != tt.want {
			t.Errorf("backendWeight(%v) = %d, want %d", tt.w, got, tt.want)
		}
	}
}

func TestBackendProblem(t *testing.T) {
	appProtocol := backendService("apps", "h2c", 8080)
	appProtocol.Spec.Ports[0].AppProtocol = new("kubernetes.io/h2c")
	httpProtocol := backendService("apps", "plain", 8080)
	httpProtocol.Spec.Ports[0].AppProtocol = new("HTTP")
	services := snapshotOf(backendService("apps", "web", 8080), backendService("other", "api", 8080), appProtocol, httpProtocol,
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "ext"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, Ports: []corev1.ServicePort{{Port: 80}}}},
	).Services
	ref := func(ns, name string, port int32) gatewayv1.BackendObjectReference {
		return backendRef(ns, name, port, nil).BackendObjectReference
	}
	tests := []struct {
		name     string
		ref      gatewayv1.BackendObjectReference
		resolved bool
		want     string
	}{
		{"same namespace", ref("", "web", 8080), true, ""},
		{"explicit core kind", gatewayv1.BackendObjectReference{Group: new(gatewayv1.Group("")), Kind: new(gatewayv1.Kind("Service")), Name: "web", Port: new(gatewayv1.PortNumber(8080))}, true, ""},
		{"other kind", gatewayv1.BackendObjectReference{Kind: new(gatewayv1.Kind("ServiceImport")), Name: "web"}, true, "is not a core Service"},
		{"other group", gatewayv1.BackendObjectReference{Group: new(gatewayv1.Group("x.io")), Name: "web"}, true, "is not a core Service"},
		{"missing", ref("", "nope", 8080), true, "names a Service that does not exist"},
		{"external name", ref("", "ext", 80), true, "names an ExternalName Service"},
		{"no port", gatewayv1.BackendObjectReference{Name: "web"}, true, "has no port"},
		{"wrong port", ref("", "web", 80), true, "names port 80, which the Service does not have"},
		// The decision vouches for a ReferenceGrant and an appProtocol per backendRef.
		{"cross namespace, resolved", ref("other", "api", 8080), true, ""},
		{"cross namespace, unresolved", ref("other", "api", 8080), false, "did not resolve (see the route's ResolvedRefs condition)"},
		{"appProtocol, resolved", ref("", "h2c", 8080), true, ""},
		{"appProtocol, unresolved", ref("", "h2c", 8080), false, "did not resolve (see the route's ResolvedRefs condition)"},
		{"appProtocol http", ref("", "plain", 8080), true, ""},
	}
	for _, tt := range tests {
		lookup := func(key cache.ObjectName) *corev1.Service { return services[key] }
		_, got := backendProblem("apps", tt.ref, lookup, tt.resolved)
		if got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}
