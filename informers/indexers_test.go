package informers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestIndexRouteParentGateways(t *testing.T) {
	refs := []gatewayv1.ParentReference{
		{Name: "gw"},
		{Name: "gw", SectionName: new(gatewayv1.SectionName("https"))}, // same Gateway again
		{Namespace: new(gatewayv1.Namespace("infra")), Name: "public"},
		{Group: new(gatewayv1.Group(gatewayv1.GroupName)), Kind: new(gatewayv1.Kind("Gateway")), Name: "explicit"},
		{Kind: new(gatewayv1.Kind("Service")), Name: "mesh"},
		{Kind: new(gatewayv1.Kind("ListenerSet")), Name: "set"},
		{Group: new(gatewayv1.Group("")), Kind: new(gatewayv1.Kind("Gateway")), Name: "core-group"},
		{Group: new(gatewayv1.Group("example.com")), Name: "other-group"},
	}
	want := []string{"apps/gw", "infra/public", "apps/explicit"}

	tests := []struct {
		name string
		obj  any
		want []string
	}{
		{"HTTPRoute", &gatewayv1.HTTPRoute{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "r"},
			Spec:       gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: refs}},
		}, want},
		{"TCPRoute", &gatewayv1.TCPRoute{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "r"},
			Spec:       gatewayv1.TCPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: refs}},
		}, want},
		{"GRPCRoute", &gatewayv1.GRPCRoute{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "r"},
			Spec:       gatewayv1.GRPCRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: refs}},
		}, want},
		{"no parentRefs", &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "r"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := IndexRouteParentGateways(tt.obj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("keys (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIndexRouteBackendServices(t *testing.T) {
	backend := func(ref gatewayv1.BackendObjectReference) gatewayv1.BackendRef {
		return gatewayv1.BackendRef{BackendObjectReference: ref}
	}
	refs := []gatewayv1.BackendRef{
		backend(gatewayv1.BackendObjectReference{Name: "web"}),
		backend(gatewayv1.BackendObjectReference{Name: "web", Port: new(gatewayv1.PortNumber(8080))}), // same Service again
		backend(gatewayv1.BackendObjectReference{Namespace: new(gatewayv1.Namespace("data")), Name: "db"}),
		backend(gatewayv1.BackendObjectReference{Group: new(gatewayv1.Group("")), Kind: new(gatewayv1.Kind("Service")), Name: "explicit"}),
		backend(gatewayv1.BackendObjectReference{Group: new(gatewayv1.Group("example.com")), Kind: new(gatewayv1.Kind("Service")), Name: "other-group"}),
		backend(gatewayv1.BackendObjectReference{Kind: new(gatewayv1.Kind("Bucket")), Name: "other-kind"}),
	}
	want := []string{"apps/web", "data/db", "apps/explicit"}

	var httpRules []gatewayv1.HTTPRouteRule
	var grpcRules []gatewayv1.GRPCRouteRule
	var tcpRules []gatewayv1.TCPRouteRule
	// One rule per ref, so that deduplication across rules is covered too.
	for _, ref := range refs {
		httpRules = append(httpRules, gatewayv1.HTTPRouteRule{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: ref}}})
		grpcRules = append(grpcRules, gatewayv1.GRPCRouteRule{BackendRefs: []gatewayv1.GRPCBackendRef{{BackendRef: ref}}})
		tcpRules = append(tcpRules, gatewayv1.TCPRouteRule{BackendRefs: []gatewayv1.BackendRef{ref}})
	}
	// A RequestMirror filter's backend is not a rule's backendRef and is not indexed.
	httpRules = append(httpRules, gatewayv1.HTTPRouteRule{Filters: []gatewayv1.HTTPRouteFilter{{
		Type:          gatewayv1.HTTPRouteFilterRequestMirror,
		RequestMirror: &gatewayv1.HTTPRequestMirrorFilter{BackendRef: gatewayv1.BackendObjectReference{Name: "mirror"}},
	}}})

	tests := []struct {
		name string
		obj  any
		want []string
	}{
		{"HTTPRoute", &gatewayv1.HTTPRoute{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "r"},
			Spec:       gatewayv1.HTTPRouteSpec{Rules: httpRules},
		}, want},
		{"TCPRoute", &gatewayv1.TCPRoute{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "r"},
			Spec:       gatewayv1.TCPRouteSpec{Rules: tcpRules},
		}, want},
		{"GRPCRoute", &gatewayv1.GRPCRoute{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "r"},
			Spec:       gatewayv1.GRPCRouteSpec{Rules: grpcRules},
		}, want},
		{"no rules", &gatewayv1.TCPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "r"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := indexRouteBackendServices(tt.obj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("keys (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIndexGatewayClassName(t *testing.T) {
	tests := []struct {
		name      string
		className gatewayv1.ObjectName
		want      []string
	}{
		{"set", "consul", []string{"consul"}},
		{"empty", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gateway := &gatewayv1.Gateway{Spec: gatewayv1.GatewaySpec{GatewayClassName: tt.className}}
			got, err := indexGatewayClassName(gateway)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("keys (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIndexGatewayCertificateSecrets(t *testing.T) {
	secretRef := func(ref gatewayv1.SecretObjectReference) gatewayv1.Listener {
		return gatewayv1.Listener{TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{ref}}}
	}
	tests := []struct {
		name      string
		listeners []gatewayv1.Listener
		want      []string
	}{
		{"no listeners", nil, nil},
		{"no TLS", []gatewayv1.Listener{{Name: "http"}}, nil},
		{"defaults to the gateway's namespace", []gatewayv1.Listener{secretRef(gatewayv1.SecretObjectReference{Name: "cert"})}, []string{"infra/cert"}},
		{"cross-namespace", []gatewayv1.Listener{secretRef(gatewayv1.SecretObjectReference{Namespace: new(gatewayv1.Namespace("certs")), Name: "shared"})}, []string{"certs/shared"}},
		{"explicit group and kind", []gatewayv1.Listener{secretRef(gatewayv1.SecretObjectReference{
			Group: new(gatewayv1.Group("")), Kind: new(gatewayv1.Kind("Secret")), Name: "cert",
		})}, []string{"infra/cert"}},
		{"other kind", []gatewayv1.Listener{secretRef(gatewayv1.SecretObjectReference{Kind: new(gatewayv1.Kind("ConfigMap")), Name: "cm"})}, nil},
		{"other group", []gatewayv1.Listener{secretRef(gatewayv1.SecretObjectReference{Group: new(gatewayv1.Group("example.com")), Name: "vault"})}, nil},
		{"several listeners, one secret twice", []gatewayv1.Listener{
			{Name: "http"},
			{Name: "https", TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{
				{Name: "cert"}, {Namespace: new(gatewayv1.Namespace("certs")), Name: "shared"},
			}}},
			secretRef(gatewayv1.SecretObjectReference{Name: "cert"}),
		}, []string{"infra/cert", "certs/shared"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gateway := &gatewayv1.Gateway{
				ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "gw"},
				Spec:       gatewayv1.GatewaySpec{Listeners: tt.listeners},
			}
			got, err := indexGatewayCertificateSecrets(gateway)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("keys (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIndexGatewaySelectsNamespaces(t *testing.T) {
	from := func(from gatewayv1.FromNamespaces) gatewayv1.Listener {
		return gatewayv1.Listener{AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &from}}}
	}
	tests := []struct {
		name      string
		listeners []gatewayv1.Listener
		want      []string
	}{
		{"no listeners", nil, nil},
		{"no allowedRoutes", []gatewayv1.Listener{{Name: "http"}}, nil},
		{"no namespaces", []gatewayv1.Listener{{AllowedRoutes: &gatewayv1.AllowedRoutes{}}}, nil},
		{"no from", []gatewayv1.Listener{{AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{}}}}, nil},
		{"Same and All", []gatewayv1.Listener{from(gatewayv1.NamespacesFromSame), from(gatewayv1.NamespacesFromAll)}, nil},
		{"one Selector", []gatewayv1.Listener{from(gatewayv1.NamespacesFromSame), from(gatewayv1.NamespacesFromSelector)}, []string{selectsNamespacesValue}},
		{"two Selectors", []gatewayv1.Listener{from(gatewayv1.NamespacesFromSelector), from(gatewayv1.NamespacesFromSelector)}, []string{selectsNamespacesValue}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gateway := &gatewayv1.Gateway{Spec: gatewayv1.GatewaySpec{Listeners: tt.listeners}}
			got, err := indexGatewaySelectsNamespaces(gateway)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("keys (-want +got):\n%s", diff)
			}
		})
	}
}

// An index on the wrong informer is a bug; the index functions say so instead of
// indexing nothing.
func TestIndexFuncsRejectOtherTypes(t *testing.T) {
	funcs := map[string]func(any) ([]string, error){
		RouteParentGatewayIndex:       IndexRouteParentGateways,
		routeBackendServiceNameIndex:  indexRouteBackendServiceNames,
		ServiceNameIndex:              func(obj any) ([]string, error) { return IndexServiceName(&gatewayv1.Gateway{}) },
		gatewayClassNameIndex:         indexGatewayClassName,
		gatewayCertificateSecretIndex: indexGatewayCertificateSecrets,
		gatewaySelectsNamespacesIndex: indexGatewaySelectsNamespaces,
	}
	for name, index := range funcs {
		if _, err := index(&corev1.Service{}); err == nil {
			t.Errorf("%s indexed a Service without error", name)
		}
	}
}
