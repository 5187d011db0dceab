package translate

import (
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestListenerProgrammable(t *testing.T) {
	status := func(conds ...metav1.Condition) []gatewayv1.ListenerStatus {
		return []gatewayv1.ListenerStatus{{Name: "l", Conditions: conds}}
	}
	accepted, resolved := cond("Accepted", true, "Accepted"), cond("ResolvedRefs", true, "ResolvedRefs")
	tests := []struct {
		name     string
		statuses []gatewayv1.ListenerStatus
		want     bool
	}{
		{"valid", status(accepted, resolved, cond("Conflicted", false, "NoConflicts")), true},
		{"no conflicted condition", status(accepted, resolved), true},
		{"not accepted", status(cond("Accepted", false, "UnsupportedProtocol"), resolved), false},
		{"refs not resolved", status(accepted, cond("ResolvedRefs", false, "InvalidCertificateRef")), false},
		{"no resolved condition", status(accepted), false},
		{"conflicted", status(accepted, resolved, cond("Conflicted", true, "HostnameConflict")), false},
		{"unknown accepted", status(metav1.Condition{Type: "Accepted", Status: metav1.ConditionUnknown}, resolved), false},
		{"no status entry", []gatewayv1.ListenerStatus{{Name: "other", Conditions: []metav1.Condition{accepted, resolved}}}, false},
		// An unsupported route kind next to a supported one: served for the supported.
		{"invalid kind beside a supported one", []gatewayv1.ListenerStatus{{Name: "l", SupportedKinds: []gatewayv1.RouteGroupKind{{Kind: "HTTPRoute"}},
			Conditions: []metav1.Condition{accepted, cond("ResolvedRefs", false, "InvalidRouteKinds")}}}, true},
		{"no supported kind", status(accepted, cond("ResolvedRefs", false, "InvalidRouteKinds")), false},
	}
	for _, tt := range tests {
		if got := listenerProgrammable(tt.statuses, "l"); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestListenerProtocol(t *testing.T) {
	got := map[gatewayv1.ProtocolType]string{}
	for _, p := range []gatewayv1.ProtocolType{gatewayv1.HTTPProtocolType, gatewayv1.HTTPSProtocolType, gatewayv1.TCPProtocolType, gatewayv1.TLSProtocolType, gatewayv1.UDPProtocolType, "h2c"} {
		got[p] = listenerProtocol(p)
	}
	want := map[gatewayv1.ProtocolType]string{"HTTP": "http", "HTTPS": "http", "TCP": "tcp", "TLS": "", "UDP": "", "h2c": ""}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Error(diff)
	}
}

func TestListenerTranslation(t *testing.T) {
	tr := &pass{snap: snapshotOf(tlsSecret("infra", "tls"), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "empty"}}), naming: Naming{Prefix: "p-"}, owner: testOwnership}
	gw := confirmedGateway("infra", "gw", true)
	tests := []struct {
		name        string
		listener    gatewayv1.Listener
		want        consulapi.APIGatewayListener
		wantCerts   []string
		wantProblem string
	}{
		{name: "http with hostname", listener: httpListener("h", 80, "a.example.com"), want: consulapi.APIGatewayListener{Name: "h", Port: 80, Protocol: "http", Hostname: "a.example.com"}},
		{name: "tcp drops hostname", listener: func() gatewayv1.Listener {
			l := tcpListener("t", 9000)
			l.Hostname = new(gatewayv1.Hostname("ignored.example.com"))
			return l
		}(), want: consulapi.APIGatewayListener{Name: "t", Port: 9000, Protocol: "tcp"}},
		{name: "https", listener: httpsListener("s", 443, "", certRef("", "tls")), want: consulapi.APIGatewayListener{Name: "s", Port: 443, Protocol: "http", TLS: consulapi.APIGatewayTLSConfiguration{
			Certificates: []consulapi.ResourceReference{{Kind: consulapi.InlineCertificate, Name: "p-secret.tls.infra"}},
		}}, wantCerts: []string{"p-secret.tls.infra"}},
		{name: "https without certificates", listener: httpsListener("s", 443, ""), wantProblem: "an HTTPS listener must terminate TLS with at least one certificateRef"},
		{name: "https passthrough", listener: func() gatewayv1.Listener {
			l := httpsListener("s", 443, "", certRef("", "tls"))
			l.TLS.Mode = new(gatewayv1.TLSModePassthrough)
			return l
		}(), wantProblem: "an HTTPS listener must terminate TLS with at least one certificateRef"},
		{name: "missing secret", listener: httpsListener("s", 443, "", certRef("", "tls"), certRef("other", "tls")), wantProblem: "Secret other/tls with tls.crt and tls.key is not in the cache"},
		{name: "secret without data", listener: httpsListener("s", 443, "", certRef("", "empty")), wantProblem: "Secret infra/empty with tls.crt and tls.key is not in the cache"},
		{name: "not a secret", listener: httpsListener("s", 443, "", gatewayv1.SecretObjectReference{Kind: new(gatewayv1.Kind("ConfigMap")), Name: "tls"}), wantProblem: "certificateRef infra/tls is not a core Secret"},
		{name: "udp", listener: gatewayv1.Listener{Name: "u", Port: 53, Protocol: gatewayv1.UDPProtocolType}, wantProblem: "protocol UDP is not supported by Consul's API gateway"},
	}
	for _, tt := range tests {
		got, certs, problem := tr.listener(gw.Namespace, tt.listener)
		if problem != tt.wantProblem {
			t.Errorf("%s: problem %q, want %q", tt.name, problem, tt.wantProblem)
		}
		if diff := gocmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: listener (-want +got):\n%s", tt.name, diff)
		}
		var names []string
		for _, c := range certs {
			names = append(names, c.GetName())
		}
		if diff := gocmp.Diff(tt.wantCerts, names); diff != "" {
			t.Errorf("%s: certificates (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestPortListeners: listeners on one port become one Consul listener whose hostname
// is the one wildcard (or none) among them, and what one Consul listener cannot serve
// is refused.
func TestPortListeners(t *testing.T) {
	http := func(name string, port int, host string, certs ...string) consulapi.APIGatewayListener {
		l := consulapi.APIGatewayListener{Name: name, Port: port, Protocol: "http", Hostname: host}
		for _, c := range certs {
			l.TLS.Certificates = append(l.TLS.Certificates, consulapi.ResourceReference{Kind: consulapi.InlineCertificate, Name: c})
		}
		return l
	}
	tests := []struct {
		name         string
		add          []consulapi.APIGatewayListener
		want         []consulapi.APIGatewayListener
		wantProblems []string
	}{{
		name: "a lone listener keeps its hostname",
		add:  []consulapi.APIGatewayListener{http("a", 80, "a.example.com"), http("b", 81, "*.example.com")},
		want: []consulapi.APIGatewayListener{http("a", 80, "a.example.com"), http("b", 81, "*.example.com")},
	}, {
		name: "concrete hostnames on one port: the routes name them",
		add:  []consulapi.APIGatewayListener{http("a", 80, "a.example.com"), http("b", 80, "b.example.com")},
		want: []consulapi.APIGatewayListener{http("a", 80, "")},
	}, {
		name: "the one wildcard is the Consul listener's hostname",
		add:  []consulapi.APIGatewayListener{http("a", 80, "example.com"), http("w", 80, "*.example.com"), http("b", 80, "b.example.com")},
		want: []consulapi.APIGatewayListener{http("a", 80, "*.example.com")},
	}, {
		name: "a hostname the wildcard's suffix does not keep: no hostname",
		add:  []consulapi.APIGatewayListener{http("w", 80, "*.example.com"), http("o", 80, "other.com")},
		want: []consulapi.APIGatewayListener{http("w", 80, "")},
	}, {
		name:         "two wildcards: no hostname; none or a nested one is refused",
		add:          []consulapi.APIGatewayListener{http("w", 80, "*.example.com"), http("v", 80, "*.other.com"), http("any", 80, ""), http("n", 80, "*.a.example.com")},
		want:         []consulapi.APIGatewayListener{http("w", 80, "")},
		wantProblems: []string{`port 80 has listener w with hostname "*.example.com" already, and one Consul listener cannot serve "" beside it`, `port 80 has listener w with hostname "*.example.com" already, and one Consul listener cannot serve "*.a.example.com" beside it`},
	}, {
		name: "certificates are merged once each",
		add:  []consulapi.APIGatewayListener{http("a", 443, "a.example.com", "ca"), http("b", 443, "b.example.com", "cb", "ca")},
		want: []consulapi.APIGatewayListener{http("a", 443, "", "ca", "cb")},
	}, {
		name:         "protocol, TLS and name",
		add:          []consulapi.APIGatewayListener{http("a", 80, "a.example.com"), {Name: "t", Port: 80, Protocol: "tcp"}, http("s", 80, "s.example.com", "c"), http("a", 81, "")},
		want:         []consulapi.APIGatewayListener{http("a", 80, "a.example.com")},
		wantProblems: []string{"port 80 is taken by http listener a", "port 80 is taken by listener a, and one of them has TLS", "an earlier listener is named a in Consul too"},
	}}
	for _, tt := range tests {
		var ps portListeners
		var problems []string
		for _, l := range tt.add {
			if p := ps.add(l); p != "" {
				problems = append(problems, p)
			}
		}
		if diff := gocmp.Diff(tt.want, ps.consulListeners()); diff != "" {
			t.Errorf("%s: listeners (-want +got):\n%s", tt.name, diff)
		}
		if diff := gocmp.Diff(tt.wantProblems, problems); diff != "" {
			t.Errorf("%s: problems (-want +got):\n%s", tt.name, diff)
		}
	}
}
