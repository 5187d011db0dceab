package sync

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TestMergePortCertificates: HTTPS listeners sharing a port become one Consul listener
// when every client reaches its listener's certificate through Consul's SNI filter
// chains, and the later listener is refused with the name that would go wrong.
func TestMergePortCertificates(t *testing.T) {
	type l struct {
		name, hostname string
		certs          []listenerCert
	}
	cert := func(secret string, hosts ...string) listenerCert { return listenerCert{secret: secret, hosts: hosts} }
	certA, certB := cert("infra/a", "default", "a.example.com"), cert("infra/b", "default", "b.example.com")
	wild := cert("infra/wild", "default", "*.example.com")
	tests := []struct {
		name      string
		listeners []l
		wantMsg   map[string]string // listener: a part of its PortUnavailable message
	}{
		{"one certificate for all", []l{{"a", "a.example.com", []listenerCert{certA}}, {"b", "b.example.com", []listenerCert{certA}}}, nil},
		{"a certificate each, told apart by DNS name", []l{{"a", "a.example.com", []listenerCert{certA}}, {"b", "b.example.com", []listenerCert{certB}}}, nil},
		{"the exact name before the wildcard", []l{{"w", "*.example.com", []listenerCert{wild}}, {"a", "a.example.com", []listenerCert{certA}}}, nil},
		{"common name repeated as DNS name", []l{{"a", "a.example.com", []listenerCert{cert("infra/a", "a.example.com", "a.example.com")}}, {"b", "b.example.com", []listenerCert{certB}}},
			map[string]string{"b": `a client asking for "a.example.com" reaches listener a, but Consul would answer it with the gateway's Consul leaf certificate`}},
		{"one name in two certificates", []l{{"a", "a.example.com", []listenerCert{certA}}, {"b", "b.example.com", []listenerCert{cert("infra/b", "default", "b.example.com", "a.example.com")}}},
			map[string]string{"b": `a client asking for "a.example.com" reaches listener a`}},
		{"a certificate naming another listener's host", []l{{"w", "*.example.com", []listenerCert{wild}}, {"b", "b.example.com", []listenerCert{cert("infra/b", "default", "b.example.com", "c.example.com")}}},
			map[string]string{"b": `a client asking for "c.example.com" reaches listener w, but Consul would answer it with the certificate of Secret infra/b`}},
		{"two wildcards, one certificate each", []l{{"w", "*.example.com", []listenerCert{wild}}, {"o", "*.other.com", []listenerCert{cert("infra/other", "default", "*.other.com")}}}, nil},
		{"a listener without hostname beside a wildcard", []l{{"w", "*.example.com", []listenerCert{wild}}, {"any", "", []listenerCert{wild}}},
			map[string]string{"any": "a listener without hostname and a wildcard one cannot share a port"}},
		{"nested wildcards", []l{{"w", "*.example.com", []listenerCert{wild}}, {"n", "*.a.example.com", []listenerCert{wild}}},
			map[string]string{"n": "Consul 1.15 serves a second wildcard of a port by a header match"}},
		{"a listener without hostname gets the leaf for unnamed hosts", []l{{"a", "a.example.com", []listenerCert{certA}}, {"any", "", []listenerCert{certB}}},
			map[string]string{"any": "a client asking for a name no hostname or certificate names reaches listener any, but Consul would answer it with the gateway's Consul leaf certificate"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			states := make([]listenerState, len(tt.listeners))
			idx := make([]int, len(tt.listeners))
			for i, x := range tt.listeners {
				listener := gatewayv1.Listener{Name: gatewayv1.SectionName(x.name), Port: 443, Protocol: gatewayv1.HTTPSProtocolType}
				if x.hostname != "" {
					listener.Hostname = ptrTo(gatewayv1.Hostname(x.hostname))
				}
				states[i] = listenerState{listener: listener, entryName: listener.Name, accepted: true, refsResolved: true, certs: x.certs}
				idx[i] = i
			}
			mergePort(states, idx, 443)
			got := map[string]string{}
			for _, st := range states {
				if st.acceptedReason == gatewayv1.ListenerReasonPortUnavailable {
					got[string(st.listener.Name)] = st.acceptedMessage
					continue
				}
				if st.consulListener != states[0].listener.Name {
					t.Errorf("listener %s is served as Consul listener %q, want %q", st.listener.Name, st.consulListener, states[0].listener.Name)
				}
			}
			if diff := cmp.Diff(keys(tt.wantMsg), keys(got)); diff != "" {
				t.Fatalf("PortUnavailable listeners (-want +got):\n%s\nmessages: %v", diff, got)
			}
			for name, part := range tt.wantMsg {
				if !strings.Contains(got[name], part) {
					t.Errorf("listener %s: message %q does not say %q", name, got[name], part)
				}
			}
		})
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestSNIChains pins the model of Consul 1.15.4's filter chains for several
// certificates: a name given twice serves the Consul leaf certificate, exact names
// come before wildcards, and the longest wildcard wins.
func TestSNIChains(t *testing.T) {
	group := []*listenerState{
		{certs: []listenerCert{{secret: "a", hosts: []string{"a.example.com", "a.example.com", "*.example.com"}}}},
		{certs: []listenerCert{{secret: "b", hosts: []string{"", "b.example.com", "*.b.example.com", "dup.example.com"}}}},
		{certs: []listenerCert{{secret: "c", hosts: []string{"", "c.example.com", "dup.example.com"}}}},
	}
	table := sniChains(group)
	for name, want := range map[string]string{
		"a.example.com":   "a", // twice in one certificate, so only its wildcard matches
		"dup.example.com": "a", // in two certificates: likewise
		"x.example.com":   "a",
		"b.example.com":   "b",
		"x.b.example.com": "b",
		"c.example.com":   "c",
		"other.com":       "",
	} {
		if got := table.serve(name); got != want {
			t.Errorf("SNI %q: served by %q, want %q", name, got, want)
		}
	}
}
