package sync

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayconfig"
)

type listenerSummary struct {
	Name       string
	Attached   int32
	Kinds      []string
	Conditions []summary
}

func summarizeListeners(ls []gatewayv1.ListenerStatus) []listenerSummary {
	out := make([]listenerSummary, len(ls))
	for i, l := range ls {
		kinds := []string{}
		for _, k := range l.SupportedKinds {
			kinds = append(kinds, string(k.Kind))
		}
		out[i] = listenerSummary{string(l.Name), l.AttachedRoutes, kinds, summarize(l.Conditions)}
	}
	return out
}

// listenerOK is the conditions of a valid listener before Consul has answered.
func portUnavailable() []summary {
	return []summary{{"Accepted", "False", "PortUnavailable"}, {"Programmed", "False", "Invalid"}, {"ResolvedRefs", "True", "ResolvedRefs"}, {"Conflicted", "False", "NoConflicts"}}
}

func listenerOK() []summary {
	return []summary{
		{"Accepted", "True", "Accepted"},
		{"Programmed", "False", "Pending"},
		{"ResolvedRefs", "True", "ResolvedRefs"},
		{"Conflicted", "False", "NoConflicts"},
	}
}

func TestGatewayStatus(t *testing.T) {
	t.Parallel()
	invalidKinds := httpListener("grpc", 80, "")
	invalidKinds.AllowedRoutes = &gatewayv1.AllowedRoutes{Kinds: []gatewayv1.RouteGroupKind{{Kind: "GRPCRoute"}, {Kind: "HTTPRoute"}}}
	passthrough := httpsListener("pass", 443, "", "cert")
	passthrough.Protocol = gatewayv1.TLSProtocolType
	withAddress := gateway("infra", "gw", httpListener("http", 80, ""))
	withAddress.Spec.Addresses = []gatewayv1.GatewaySpecAddress{{Value: "10.0.0.1"}}

	tests := []struct {
		name       string
		gateway    *gatewayv1.Gateway
		objs       []runtime.Object
		conditions []summary
		listeners  []listenerSummary
	}{{
		name:       "HTTP, HTTPS and TCP listeners are valid",
		gateway:    gateway("infra", "gw", httpListener("http", 80, ""), httpsListener("https", 443, "", "cert"), tcpListener("tcp", 5432)),
		objs:       []runtime.Object{tlsSecret(t, "infra", "cert")},
		conditions: []summary{{"Accepted", "True", "Accepted"}, {"Programmed", "False", "Pending"}},
		listeners: []listenerSummary{
			{"http", 0, []string{"HTTPRoute"}, listenerOK()},
			{"https", 0, []string{"HTTPRoute"}, listenerOK()},
			{"tcp", 0, []string{"TCPRoute"}, listenerOK()},
		},
	}, {
		name:       "UDP and TLS listeners are unsupported protocols",
		gateway:    gateway("infra", "gw", httpListener("http", 80, ""), gatewayv1.Listener{Name: "udp", Port: 53, Protocol: gatewayv1.UDPProtocolType}, passthrough),
		conditions: []summary{{"Accepted", "True", "ListenersNotValid"}, {"Programmed", "False", "Pending"}},
		listeners: []listenerSummary{
			{"http", 0, []string{"HTTPRoute"}, listenerOK()},
			{"udp", 0, []string{}, []summary{{"Accepted", "False", "UnsupportedProtocol"}, {"Programmed", "False", "Invalid"}, {"ResolvedRefs", "True", "ResolvedRefs"}, {"Conflicted", "False", "NoConflicts"}}},
			{"pass", 0, []string{}, []summary{{"Accepted", "False", "UnsupportedProtocol"}, {"Programmed", "False", "Invalid"}, {"ResolvedRefs", "True", "ResolvedRefs"}, {"Conflicted", "False", "NoConflicts"}}},
		},
	}, {
		// The spec: "IPs are not allowed" as a listener hostname. Not accepted, so not
		// programmed and never written to Consul; its certificate is not looked at.
		name:       "an IP address as hostname is not accepted",
		gateway:    gateway("infra", "gw", httpListener("http", 80, ""), httpListener("ip", 81, "10.1.2.3"), withHostname(httpsListener("ip-tls", 443, "", "nope"), "10.1.2.4")),
		conditions: []summary{{"Accepted", "True", "ListenersNotValid"}, {"Programmed", "False", "Pending"}},
		listeners: []listenerSummary{
			{"http", 0, []string{"HTTPRoute"}, listenerOK()},
			{"ip", 0, []string{"HTTPRoute"}, []summary{{"Accepted", "False", "UnsupportedValue"}, {"Programmed", "False", "Invalid"}, {"ResolvedRefs", "True", "ResolvedRefs"}, {"Conflicted", "False", "NoConflicts"}}},
			{"ip-tls", 0, []string{"HTTPRoute"}, []summary{{"Accepted", "False", "UnsupportedValue"}, {"Programmed", "False", "Invalid"}, {"ResolvedRefs", "True", "ResolvedRefs"}, {"Conflicted", "False", "NoConflicts"}}},
		},
	}, {
		name:       "missing certificate and a cross-namespace certificate without a grant",
		gateway:    gateway("infra", "gw", httpsListener("missing", 443, "", "nope"), httpsListener("cross", 8443, "certs", "cert")),
		objs:       []runtime.Object{tlsSecret(t, "certs", "cert")},
		conditions: []summary{{"Accepted", "False", "ListenersNotValid"}, {"Programmed", "False", "Invalid"}},
		listeners: []listenerSummary{
			{"missing", 0, []string{"HTTPRoute"}, []summary{{"Accepted", "True", "Accepted"}, {"Programmed", "False", "Invalid"}, {"ResolvedRefs", "False", "InvalidCertificateRef"}, {"Conflicted", "False", "NoConflicts"}}},
			{"cross", 0, []string{"HTTPRoute"}, []summary{{"Accepted", "True", "Accepted"}, {"Programmed", "False", "Invalid"}, {"ResolvedRefs", "False", "RefNotPermitted"}, {"Conflicted", "False", "NoConflicts"}}},
		},
	}, {
		name:       "a ReferenceGrant permits the cross-namespace certificate",
		gateway:    gateway("infra", "gw", httpsListener("cross", 443, "certs", "cert")),
		objs:       []runtime.Object{tlsSecret(t, "certs", "cert"), grantSecretsTo("infra", "certs")},
		conditions: []summary{{"Accepted", "True", "Accepted"}, {"Programmed", "False", "Pending"}},
		listeners:  []listenerSummary{{"cross", 0, []string{"HTTPRoute"}, listenerOK()}},
	}, {
		// An unsupported kind next to a supported one: ResolvedRefs says so, and the
		// listener is served for the kind it supports.
		name:       "unsupported route kinds",
		gateway:    gateway("infra", "gw", invalidKinds),
		conditions: []summary{{"Accepted", "True", "Accepted"}, {"Programmed", "False", "Pending"}},
		listeners: []listenerSummary{
			{"grpc", 0, []string{"HTTPRoute"}, []summary{{"Accepted", "True", "Accepted"}, {"Programmed", "False", "Pending"}, {"ResolvedRefs", "False", "InvalidRouteKinds"}, {"Conflicted", "False", "NoConflicts"}}},
		},
	}, {
		name: "protocol and hostname conflicts; other hostnames share a port as one Consul listener",
		gateway: gateway("infra", "gw", httpListener("a", 80, ""), tcpListener("b", 80), httpListener("c", 81, "x.example.com"), httpListener("d", 81, "x.example.com"), httpListener("e", 82, "e.example.com"), httpListener("f", 82, "f.example.com"),
			httpListener("w1", 83, "*.example.com"), httpListener("c3", 83, "a.example.com"), httpListener("w2", 83, "*.other.com"), httpListener("c4", 83, "a.other.com"), httpListener("any", 83, ""), httpListener("nested", 83, "*.a.example.com")),
		conditions: []summary{{"Accepted", "True", "ListenersNotValid"}, {"Programmed", "False", "Pending"}},
		listeners: []listenerSummary{
			{"a", 0, []string{"HTTPRoute"}, []summary{{"Accepted", "False", "ProtocolConflict"}, {"Programmed", "False", "ProtocolConflict"}, {"ResolvedRefs", "True", "ResolvedRefs"}, {"Conflicted", "True", "ProtocolConflict"}}},
			{"b", 0, []string{"TCPRoute"}, []summary{{"Accepted", "False", "ProtocolConflict"}, {"Programmed", "False", "ProtocolConflict"}, {"ResolvedRefs", "True", "ResolvedRefs"}, {"Conflicted", "True", "ProtocolConflict"}}},
			{"c", 0, []string{"HTTPRoute"}, []summary{{"Accepted", "False", "HostnameConflict"}, {"Programmed", "False", "HostnameConflict"}, {"ResolvedRefs", "True", "ResolvedRefs"}, {"Conflicted", "True", "HostnameConflict"}}},
			{"d", 0, []string{"HTTPRoute"}, []summary{{"Accepted", "False", "HostnameConflict"}, {"Programmed", "False", "HostnameConflict"}, {"ResolvedRefs", "True", "ResolvedRefs"}, {"Conflicted", "True", "HostnameConflict"}}},
			{"e", 0, []string{"HTTPRoute"}, listenerOK()},
			{"f", 0, []string{"HTTPRoute"}, listenerOK()},
			{"w1", 0, []string{"HTTPRoute"}, listenerOK()},
			{"c3", 0, []string{"HTTPRoute"}, listenerOK()},
			// A second wildcard is served by a header match; a listener without
			// hostname cannot share a port with wildcards, nor a wildcard within
			// another.
			{"w2", 0, []string{"HTTPRoute"}, listenerOK()},
			{"c4", 0, []string{"HTTPRoute"}, listenerOK()},
			{"any", 0, []string{"HTTPRoute"}, portUnavailable()},
			{"nested", 0, []string{"HTTPRoute"}, portUnavailable()},
		},
	}, {
		name: "listeners sharing a port and a certificate are one Consul listener, an invalid one included",
		gateway: gateway("infra", "gw", withHostname(httpsListener("bad", 443, "", "nope"), "a.example.com"), withHostname(httpsListener("good", 443, "", "cert"), "b.example.com"),
			withHostname(httpsListener("later", 443, "", "cert"), "c.example.com")),
		objs:       []runtime.Object{tlsSecret(t, "infra", "cert")},
		conditions: []summary{{"Accepted", "True", "ListenersNotValid"}, {"Programmed", "False", "Pending"}},
		listeners: []listenerSummary{
			{"bad", 0, []string{"HTTPRoute"}, []summary{{"Accepted", "True", "Accepted"}, {"Programmed", "False", "Invalid"}, {"ResolvedRefs", "False", "InvalidCertificateRef"}, {"Conflicted", "False", "NoConflicts"}}},
			{"good", 0, []string{"HTTPRoute"}, listenerOK()},
			{"later", 0, []string{"HTTPRoute"}, listenerOK()},
		},
	}, {
		name:       "of nested wildcard listeners sharing a port, a valid one is programmed before an invalid one listed first",
		gateway:    gateway("infra", "gw", withHostname(httpsListener("bad", 443, "", "nope"), "*.example.com"), withHostname(httpsListener("good", 443, "", "cert"), "*.a.example.com")),
		objs:       []runtime.Object{tlsSecret(t, "infra", "cert")},
		conditions: []summary{{"Accepted", "True", "ListenersNotValid"}, {"Programmed", "False", "Pending"}},
		listeners: []listenerSummary{
			{"bad", 0, []string{"HTTPRoute"}, []summary{{"Accepted", "False", "PortUnavailable"}, {"Programmed", "False", "Invalid"}, {"ResolvedRefs", "False", "InvalidCertificateRef"}, {"Conflicted", "False", "NoConflicts"}}},
			{"good", 0, []string{"HTTPRoute"}, listenerOK()},
		},
	}, {
		// Consul serves several certificates of one listener by SNI, from the names in
		// each: the conformance suite's certificates (common name "default", one DNS
		// name each) are told apart.
		name:       "HTTPS listeners of one port with certificates Consul tells apart by SNI",
		gateway:    gateway("infra", "gw", withHostname(httpsListener("a", 443, "", "cert-a"), "a.example.com"), withHostname(httpsListener("b", 443, "", "cert-b"), "b.example.com")),
		objs:       []runtime.Object{tlsSecretFor(t, "infra", "cert-a", "default", "a.example.com"), tlsSecretFor(t, "infra", "cert-b", "default", "b.example.com")},
		conditions: []summary{{"Accepted", "True", "Accepted"}, {"Programmed", "False", "Pending"}},
		listeners: []listenerSummary{
			{"a", 0, []string{"HTTPRoute"}, listenerOK()},
			{"b", 0, []string{"HTTPRoute"}, listenerOK()},
		},
	}, {
		// Consul 1.15 leaves out of SNI matching a name two certificates have, or one
		// has twice (common name and DNS name): those clients would get the gateway's
		// Consul leaf certificate.
		name:       "HTTPS listeners of one port with certificates Consul cannot tell apart",
		gateway:    gateway("infra", "gw", withHostname(httpsListener("a", 443, "", "cert-a"), "a.example.com"), withHostname(httpsListener("b", 443, "", "cert-b"), "b.example.com")),
		objs:       []runtime.Object{tlsSecretFor(t, "infra", "cert-a", "a.example.com", "a.example.com"), tlsSecretFor(t, "infra", "cert-b", "b.example.com", "b.example.com")},
		conditions: []summary{{"Accepted", "True", "ListenersNotValid"}, {"Programmed", "False", "Pending"}},
		listeners: []listenerSummary{
			{"a", 0, []string{"HTTPRoute"}, listenerOK()},
			{"b", 0, []string{"HTTPRoute"}, portUnavailable()},
		},
	}, {
		name:       "requested addresses are unsupported",
		gateway:    withAddress,
		conditions: []summary{{"Accepted", "False", "UnsupportedAddress"}, {"Programmed", "False", "Invalid"}},
		// A listener of a Gateway that is not accepted is valid but not programmed.
		listeners: []listenerSummary{{"http", 0, []string{"HTTPRoute"}, []summary{{"Accepted", "True", "Accepted"}, {"Programmed", "False", "Invalid"}, {"ResolvedRefs", "True", "ResolvedRefs"}, {"Conflicted", "False", "NoConflicts"}}}},
	}, {
		name:    "attachedRoutes counts accepted routes per listener",
		gateway: gateway("infra", "gw", allowAll(httpListener("all", 80, "")), httpListener("same", 81, ""), allowAll(httpListener("host", 82, "a.example.com"))),
		objs: []runtime.Object{
			service("apps", "echo", 8080), service("infra", "echo", 8080),
			httpRoute("apps", "whole-gateway", nil, parentRef("infra", "gw", "")),             // all, host (same: other namespace)
			httpRoute("infra", "same-ns", []string{"b.example.com"}, parentRef("", "gw", "")), // all, same; not host (hostname)
			httpRoute("apps", "twice", nil, parentRef("infra", "gw", "all"), parentRef("infra", "gw", "host")),
			httpRoute("apps", "other-gateway", nil, parentRef("infra", "elsewhere", "")),
		},
		conditions: []summary{{"Accepted", "True", "Accepted"}, {"Programmed", "False", "Pending"}},
		listeners: []listenerSummary{
			{"all", 3, []string{"HTTPRoute"}, listenerOK()},
			{"same", 1, []string{"HTTPRoute"}, listenerOK()},
			{"host", 2, []string{"HTTPRoute"}, listenerOK()},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			class := ourClass()
			d := newTestDecider(t, append(tt.objs, class, tt.gateway)...)
			status, err := d.gatewayStatus(tt.gateway, class, metav1.Now())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.conditions, summarize(status.Conditions)); diff != "" {
				t.Errorf("gateway conditions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.listeners, summarizeListeners(status.Listeners)); diff != "" {
				t.Errorf("listeners (-want +got):\n%s", diff)
			}
			for _, c := range status.Conditions {
				if c.ObservedGeneration != tt.gateway.Generation {
					t.Errorf("condition %s observedGeneration = %d, want %d", c.Type, c.ObservedGeneration, tt.gateway.Generation)
				}
			}
		})
	}
}

func withHostname(l gatewayv1.Listener, hostname string) gatewayv1.Listener {
	l.Hostname = ptrTo(gatewayv1.Hostname(hostname))
	return l
}

func TestGatewayClassStatus(t *testing.T) {
	t.Parallel()
	accepted := []summary{{"Accepted", "True", "Accepted"}, {"SupportedVersion", "True", "SupportedVersion"}}
	invalid := []summary{{"Accepted", "False", "InvalidParameters"}, {"SupportedVersion", "True", "SupportedVersion"}}
	tests := []struct {
		name          string
		params        *gatewayv1.ParametersReference
		bundleVersion string
		want          []summary
		message       string // of Accepted, when set
	}{
		{"accepted", nil, "v1.6.3", accepted, "GatewayClass is accepted"},
		{"patch release", nil, "v1.6.0", accepted, ""},
		{"other minor release", nil, "v1.5.1", []summary{{"Accepted", "True", "Accepted"}, {"SupportedVersion", "False", "UnsupportedVersion"}}, ""},
		{"unknown bundle", nil, "", []summary{{"Accepted", "True", "Accepted"}, {"SupportedVersion", "False", "UnsupportedVersion"}}, ""},
		{"valid GatewayConfig", configParams("infra", "valid"), "v1.6.3", accepted, ""},
		{"another kind", &gatewayv1.ParametersReference{Group: "", Kind: "ConfigMap", Name: "x", Namespace: new(gatewayv1.Namespace("infra"))}, "v1.6.3", invalid,
			`parametersRef names ConfigMap x of group ""; this controller takes GatewayConfig of group consul-gateway-controller.github.io`},
		{"no namespace", &gatewayv1.ParametersReference{Group: v1alpha1.GroupName, Kind: v1alpha1.GatewayConfigKind, Name: "valid"}, "v1.6.3", invalid,
			"parametersRef to GatewayConfig valid has no namespace; GatewayConfig is namespaced"},
		{"missing", configParams("infra", "missing"), "v1.6.3", invalid, "GatewayConfig infra/missing does not exist"},
		{"invalid", configParams("infra", "invalid"), "v1.6.3", invalid, "GatewayConfig infra/invalid is invalid: spec.replicas.min 3 exceeds max 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			class := ourClass()
			class.Spec.ParametersRef = tt.params
			d := newTestDecider(t, class, gatewayConfig("infra", "valid", nil), gatewayConfig("infra", "invalid", &v1alpha1.Replicas{Min: new(int32(3)), Max: new(int32(2))}))
			params, err := gatewayconfig.OfClass(d.configs, class)
			if err != nil {
				t.Fatal(err)
			}
			status := gatewayClassStatus(class, params, tt.bundleVersion, consullimits.Consul115, metav1.Now())
			if diff := cmp.Diff(tt.want, summarize(status.Conditions)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if tt.message != "" && status.Conditions[0].Message != tt.message {
				t.Errorf("Accepted message %q, want %q", status.Conditions[0].Message, tt.message)
			}
		})
	}
}

// A Gateway is deployed with its own parameters when it names some, else with its
// class's; either being unusable keeps it from being accepted.
func TestGatewayParameters(t *testing.T) {
	t.Parallel()
	own := func(name string) *gatewayv1.GatewayInfrastructure {
		return &gatewayv1.GatewayInfrastructure{ParametersRef: &gatewayv1.LocalParametersReference{Group: v1alpha1.GroupName, Kind: v1alpha1.GatewayConfigKind, Name: name}}
	}
	tests := []struct {
		name     string
		class    *gatewayv1.ParametersReference
		infra    *gatewayv1.GatewayInfrastructure
		accepted summary
		message  string
	}{
		{"none", nil, nil, summary{"Accepted", "True", "Accepted"}, ""},
		{"own, valid", nil, own("valid"), summary{"Accepted", "True", "Accepted"}, ""},
		{"own, missing", nil, own("missing"), summary{"Accepted", "False", "InvalidParameters"},
			"spec.infrastructure.parametersRef: GatewayConfig infra/missing does not exist"},
		{"own, another kind", nil, &gatewayv1.GatewayInfrastructure{ParametersRef: &gatewayv1.LocalParametersReference{Group: "", Kind: "ConfigMap", Name: "valid"}},
			summary{"Accepted", "False", "InvalidParameters"}, `spec.infrastructure.parametersRef: parametersRef names ConfigMap valid of group ""`},
		{"own, invalid", nil, own("invalid"), summary{"Accepted", "False", "InvalidParameters"},
			"spec.infrastructure.parametersRef: GatewayConfig infra/invalid is invalid: spec.replicas.min 3 exceeds max 2"},
		{"class's, missing", configParams("infra", "missing"), own("valid"), summary{"Accepted", "False", "Invalid"},
			"GatewayClass ours is not accepted: GatewayConfig infra/missing does not exist"},
		{"class's, valid", configParams("infra", "valid"), nil, summary{"Accepted", "True", "Accepted"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			class := ourClass()
			class.Spec.ParametersRef = tt.class
			gw := gateway("infra", "gw", httpListener("http", 80, ""))
			gw.Spec.Infrastructure = tt.infra
			d := newTestDecider(t, class, gw, gatewayConfig("infra", "valid", nil), gatewayConfig("infra", "invalid", &v1alpha1.Replicas{Min: new(int32(3)), Max: new(int32(2))}))
			status, err := d.gatewayStatus(gw, class, metav1.Now())
			if err != nil {
				t.Fatal(err)
			}
			got := summarize(status.Conditions)
			if len(got) == 0 || got[0] != tt.accepted {
				t.Fatalf("conditions %v, want Accepted %v", got, tt.accepted)
			}
			if tt.message != "" && !strings.HasPrefix(status.Conditions[0].Message, tt.message) {
				t.Errorf("Accepted message %q, want it to start with %q", status.Conditions[0].Message, tt.message)
			}
		})
	}
}

func configParams(namespace, name string) *gatewayv1.ParametersReference {
	return &gatewayv1.ParametersReference{Group: v1alpha1.GroupName, Kind: v1alpha1.GatewayConfigKind, Name: name, Namespace: new(gatewayv1.Namespace(namespace))}
}

func gatewayConfig(namespace, name string, replicas *v1alpha1.Replicas) *v1alpha1.GatewayConfig {
	return &v1alpha1.GatewayConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       v1alpha1.GatewayConfigSpec{Replicas: replicas},
	}
}

func TestSupportedFeaturesAreSortedAndFollowCapabilities(t *testing.T) {
	t.Parallel()
	names := func(caps consullimits.Capabilities) []string {
		var out []string
		for _, f := range supportedFeatures(caps) {
			out = append(out, string(f.Name))
		}
		return out
	}
	// Not HTTPRoute: its core conformance includes RequestRedirect, which Consul 1.15's
	// http-route cannot express. Not TCPRoute: its conformance includes weighted
	// backends, and Consul's tcp-route forwards to one service. Not
	// HTTPRouteMethodMatching: Consul does not rank method matches.
	want := []string{
		"Gateway", "GatewayAddressEmpty", "GatewayInfrastructure", "GatewayPort8080",
		"HTTPRouteBackendRequestHeaderModification", "HTTPRouteDestinationPortMatching",
		"HTTPRouteNamedRouteRule", "HTTPRouteParentRefPort", "HTTPRouteQueryParamMatching",
		"ListenerSet", "ReferenceGrant",
	}
	if diff := cmp.Diff(want, names(consullimits.Consul115)); diff != "" {
		t.Errorf("features for Consul 1.15 (-want +got):\n%s", diff)
	}
	all := names(consullimits.Capabilities{ResponseHeaderModifier: true, FullPathRewrite: true})
	for _, f := range []string{"HTTPRouteResponseHeaderModification", "HTTPRoutePathRewrite"} {
		if !contains(all, f) {
			t.Errorf("features with every capability lack %s: %v", f, all)
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func TestMergeConditionsKeepsTransitionTimeWhileStatusHolds(t *testing.T) {
	t.Parallel()
	then := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	now := metav1.NewTime(then.Add(time.Hour))
	existing := []metav1.Condition{
		{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", LastTransitionTime: then},
		{Type: "ResolvedRefs", Status: metav1.ConditionTrue, Reason: "ResolvedRefs", LastTransitionTime: then},
	}
	desired := []metav1.Condition{
		{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", Message: "new message"},
		{Type: "ResolvedRefs", Status: metav1.ConditionFalse, Reason: "BackendNotFound"},
		{Type: "PartiallyInvalid", Status: metav1.ConditionTrue, Reason: "UnsupportedValue"},
	}
	got := mergeConditions(existing, desired, now)
	wantTimes := []metav1.Time{then, now, now}
	for i, c := range got {
		if !c.LastTransitionTime.Equal(&wantTimes[i]) {
			t.Errorf("%s lastTransitionTime = %v, want %v", c.Type, c.LastTransitionTime, wantTimes[i])
		}
	}
	if got[0].Message != "new message" {
		t.Errorf("message not updated: %q", got[0].Message)
	}
}

// Conditions of types we do not own are another controller's: the spec says an
// implementation MUST NOT remove them, so every write keeps them as they are.
func TestStatusKeepsConditionsWeDoNotOwn(t *testing.T) {
	t.Parallel()
	then := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	theirs := metav1.Condition{Type: "example.com/Audited", Status: metav1.ConditionTrue, Reason: "Audited", Message: "checked by another controller", ObservedGeneration: 1, LastTransitionTime: then}
	stale := metav1.Condition{Type: "Programmed", Status: metav1.ConditionTrue, Reason: "Programmed", LastTransitionTime: then}
	keeps := func(t *testing.T, where string, conds []metav1.Condition) {
		t.Helper()
		c := findCondition(conds, theirs.Type)
		if c == nil {
			t.Errorf("%s: %s was removed: %v", where, theirs.Type, summarize(conds))
			return
		}
		if diff := cmp.Diff(theirs, *c); diff != "" {
			t.Errorf("%s: %s changed (-want +got):\n%s", where, theirs.Type, diff)
		}
	}

	class := ourClass()
	class.Status.Conditions = []metav1.Condition{theirs}
	keeps(t, "GatewayClass", gatewayClassStatus(class, gatewayconfig.Resolved{}, "v1.6.3", consullimits.Consul115, metav1.Now()).Conditions)

	gw := gateway("infra", "gw", httpListener("http", 80, ""))
	gw.Status.Conditions = []metav1.Condition{theirs, stale}
	gw.Status.Listeners = []gatewayv1.ListenerStatus{{Name: "http", Conditions: []metav1.Condition{stale, theirs}}}
	d := newTestDecider(t, ourClass(), gw)
	status, err := d.gatewayStatus(gw, ourClass(), metav1.Now())
	if err != nil {
		t.Fatal(err)
	}
	keeps(t, "Gateway", status.Conditions)
	keeps(t, "listener", status.Listeners[0].Conditions)
	// Our own types are still ours to decide: the stale Programmed is replaced.
	for where, conds := range map[string][]metav1.Condition{"Gateway": status.Conditions, "listener": status.Listeners[0].Conditions} {
		if c := findCondition(conds, "Programmed"); c == nil || c.Status != metav1.ConditionFalse {
			t.Errorf("%s: Programmed %v, want our False/Pending", where, c)
		}
		n := 0
		for _, c := range conds {
			if c.Type == "Programmed" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s: %d Programmed conditions, want 1", where, n)
		}
	}
}
