package integration

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	consulapi "github.com/hashicorp/consul/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/testcerts"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// TestCompactEncodingAcceptedByConsul115 writes one entry of every kind the controller
// writes, in consul.Compact's encoding, to the real Consul 1.15 agent: each write is
// accepted, reads back as sent, and Consul's gateway controller accepts the gateway and
// binds both routes. The same api-gateway and http-route in consul/api's own encoding
// are refused, which is why Compact exists.
func TestCompactEncodingAcceptedByConsul115(t *testing.T) {
	client := env.ConsulClient
	entries := client.ConfigEntries()

	// testcerts makes an ECDSA P-256 certificate with an "EC PRIVATE KEY" (SEC1) key;
	// Consul 1.15 accepts it (it only checks that tls.X509KeyPair loads the pair and
	// that the hosts are DNS names).
	certPEM, keyPEM, err := testcerts.SelfSigned("gw.enc.example.com", "*.enc.example.com")
	if err != nil {
		t.Fatal(err)
	}
	meta := map[string]string{"gateway-controller": "example.com/enc-test", "k8s-uid": "", "k8s-name": "enc"}
	cert := &consulapi.InlineCertificateConfigEntry{
		Kind:        consulapi.InlineCertificate,
		Name:        "enc-cert",
		Certificate: string(certPEM),
		PrivateKey:  string(keyPEM),
		Meta:        meta,
	}
	backends := []*consulapi.ServiceConfigEntry{
		{Kind: consulapi.ServiceDefaults, Name: "enc-web-v1", Protocol: "http", Meta: meta},
		{Kind: consulapi.ServiceDefaults, Name: "enc-web-v2", Protocol: "http", Meta: meta},
	}
	gateway := &consulapi.APIGatewayConfigEntry{
		Kind: consulapi.APIGateway,
		Name: "enc-gateway",
		Meta: meta,
		Listeners: []consulapi.APIGatewayListener{
			{Name: "http", Hostname: "*.enc.example.com", Port: 18480, Protocol: "http"},
			{Name: "https", Port: 18443, Protocol: "http", TLS: consulapi.APIGatewayTLSConfiguration{
				Certificates: []consulapi.ResourceReference{{Kind: consulapi.InlineCertificate, Name: cert.Name}},
			}},
			{Name: "tcp", Port: 18490, Protocol: "tcp"},
		},
	}
	httpRoute := &consulapi.HTTPRouteConfigEntry{
		Kind: consulapi.HTTPRoute,
		Name: "enc-http-route",
		Meta: meta,
		Parents: []consulapi.ResourceReference{
			{Kind: consulapi.APIGateway, Name: gateway.Name, SectionName: "http"},
			{Kind: consulapi.APIGateway, Name: gateway.Name, SectionName: "https"},
		},
		Hostnames: []string{"app.enc.example.com"},
		Rules: []consulapi.HTTPRouteRule{
			{
				Matches: []consulapi.HTTPMatch{
					{Path: consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchExact, Value: "/exact"}, Method: consulapi.HTTPMatchMethodGet},
					{
						Path:   consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchPrefix, Value: "/api"},
						Method: consulapi.HTTPMatchMethodPost,
						Headers: []consulapi.HTTPHeaderMatch{
							{Match: consulapi.HTTPHeaderMatchExact, Name: "X-Env", Value: "prod"},
							{Match: consulapi.HTTPHeaderMatchRegularExpression, Name: "X-Version", Value: "^v[0-9]+$"},
						},
						Query: []consulapi.HTTPQueryMatch{
							{Match: consulapi.HTTPQueryMatchExact, Name: "debug", Value: "1"},
							{Match: consulapi.HTTPQueryMatchRegularExpression, Name: "id", Value: "^[0-9]+$"},
						},
					},
					{Path: consulapi.HTTPPathMatch{Match: consulapi.HTTPPathMatchRegularExpression, Value: "^/re/[a-z]+$"}},
				},
				Filters: consulapi.HTTPFilters{
					Headers: []consulapi.HTTPHeaderFilter{{
						Add:    map[string]string{"X-Added": "yes"},
						Set:    map[string]string{"X-Set": "1", "X-Empty": ""},
						Remove: []string{"X-Remove"},
					}},
					URLRewrite: &consulapi.URLRewrite{Path: "/v2"},
				},
				Services: []consulapi.HTTPService{
					{Name: backends[0].Name, Weight: 90, Filters: consulapi.HTTPFilters{
						Headers: []consulapi.HTTPHeaderFilter{{Set: map[string]string{"X-Backend": "v1"}}},
					}},
					{Name: backends[1].Name, Weight: 10, Filters: consulapi.HTTPFilters{
						Headers: []consulapi.HTTPHeaderFilter{{Add: map[string]string{"X-Backend": "v2"}, Remove: []string{"X-Debug"}}},
					}},
				},
			},
		},
	}
	tcpRoute := &consulapi.TCPRouteConfigEntry{
		Kind:     consulapi.TCPRoute,
		Name:     "enc-tcp-route",
		Meta:     meta,
		Parents:  []consulapi.ResourceReference{{Kind: consulapi.APIGateway, Name: gateway.Name, SectionName: "tcp"}},
		Services: []consulapi.TCPService{{Name: "enc-db"}},
	}
	all := []consulapi.ConfigEntry{cert, backends[0], backends[1], gateway, httpRoute, tcpRoute}
	t.Cleanup(func() {
		for _, e := range slices.Backward(all) {
			if _, err := entries.Delete(e.GetKind(), e.GetName(), nil); err != nil {
				t.Errorf("delete %s %s: %v", e.GetKind(), e.GetName(), err)
			}
		}
		for _, e := range all {
			if got := encGet(t, e.GetKind(), e.GetName()); got != nil {
				t.Errorf("%s %s still exists after delete", e.GetKind(), e.GetName())
			}
		}
	})

	// consul/api's own encoding: refused, and nothing is written.
	refused := []struct {
		entry consulapi.ConfigEntry
		keys  []string
	}{
		{gateway, []string{`invalid config key "TLS"`}},
		{httpRoute, []string{
			`invalid config key "Rules[0].Filters.JWT"`,
			`invalid config key "Rules[0].Filters.RetryFilter"`,
			`invalid config key "Rules[0].ResponseFilters"`,
			`invalid config key "Rules[0].Services[0].Filters.JWT"`,
		}},
	}
	for _, r := range refused {
		ok, _, err := entries.CAS(r.entry, 0, nil)
		if err == nil {
			t.Errorf("%s in consul/api's encoding: CAS = %v, nil; want Consul 1.15 to refuse it", r.entry.GetKind(), ok)
		}
		for _, key := range r.keys {
			if err != nil && !strings.Contains(err.Error(), key) {
				t.Errorf("%s in consul/api's encoding: error %q does not mention %s", r.entry.GetKind(), err, key)
			}
		}
		if got := encGet(t, r.entry.GetKind(), r.entry.GetName()); got != nil {
			t.Fatalf("the refused %s was written: %+v", r.entry.GetKind(), got)
		}
	}

	// Compact's encoding: every write accepted.
	for _, e := range all {
		ok, _, err := entries.CAS(consul.Compact(e), 0, nil)
		if err != nil || !ok {
			t.Fatalf("CAS(Compact(%s %s), 0) = %v, %v; want true, nil", e.GetKind(), e.GetName(), ok, err)
		}
	}
	// Check-and-set still means check-and-set through the wrapper. The entry written
	// must differ from the one Consul holds: Consul 1.15 answers true to any upsert,
	// check-and-set included, whose entry equals the stored one, without looking at
	// the index (it skips the no-op). Before Consul's gateway controller has written
	// the gateway's status the stored entry equals the one just sent, so a second CAS
	// of the same content could pass.
	changed := *gateway
	changed.Meta = maps.Clone(gateway.Meta)
	changed.Meta["enc-second-cas"] = "1"
	if ok, _, err := entries.CAS(consul.Compact(&changed), 0, nil); ok || err != nil {
		t.Errorf("a second CAS with index 0 and changed content = %v, %v; want false, nil", ok, err)
	}

	// Read back: what was sent comes back, apart from what Consul manages.
	managed := cmp.Options{
		cmpopts.IgnoreFields(consulapi.APIGatewayConfigEntry{}, "Status", "CreateIndex", "ModifyIndex"),
		cmpopts.IgnoreFields(consulapi.HTTPRouteConfigEntry{}, "Status", "CreateIndex", "ModifyIndex"),
		cmpopts.IgnoreFields(consulapi.TCPRouteConfigEntry{}, "Status", "CreateIndex", "ModifyIndex"),
		cmpopts.IgnoreFields(consulapi.InlineCertificateConfigEntry{}, "CreateIndex", "ModifyIndex"),
	}
	for _, sent := range []consulapi.ConfigEntry{cert, gateway, httpRoute, tcpRoute} {
		got := encGet(t, sent.GetKind(), sent.GetName())
		if diff := cmp.Diff(sent, got, managed); diff != "" {
			t.Errorf("%s %s read back differs (-sent +got):\n%s", sent.GetKind(), sent.GetName(), diff)
		}
		if got != nil && got.GetModifyIndex() == 0 {
			t.Errorf("%s %s read back without a ModifyIndex", sent.GetKind(), sent.GetName())
		}
	}
	for _, sent := range backends {
		got, ok := encGet(t, sent.Kind, sent.Name).(*consulapi.ServiceConfigEntry)
		if !ok || got.Protocol != sent.Protocol || !cmp.Equal(got.Meta, sent.Meta) {
			t.Errorf("service-defaults %s read back = %+v, want protocol %q and meta %v", sent.Name, got, sent.Protocol, sent.Meta)
		}
	}
	// List decodes the same entries.
	listed, _, err := entries.List(consulapi.HTTPRoute, nil)
	if err != nil {
		t.Fatalf("list http-routes: %v", err)
	}
	i := slices.IndexFunc(listed, func(e consulapi.ConfigEntry) bool { return e.GetName() == httpRoute.Name })
	if i < 0 {
		t.Fatalf("List(http-route) lacks %s", httpRoute.Name)
	}
	if diff := cmp.Diff(httpRoute, listed[i], managed); diff != "" {
		t.Errorf("listed http-route differs (-sent +got):\n%s", diff)
	}

	// Consul computes status asynchronously: the gateway is accepted with its
	// certificate resolved, and both routes are accepted and bound to every parent.
	encWaitStatus(t, gateway.Kind, gateway.Name, func(s consulapi.ConfigEntryStatus) error {
		if err := encWantCondition(s, "Accepted", nil); err != nil {
			return err
		}
		for _, l := range gateway.Listeners {
			ref := consulapi.ResourceReference{Kind: consulapi.APIGateway, Name: gateway.Name, SectionName: l.Name}
			if err := encWantCondition(s, "ResolvedRefs", &ref); err != nil {
				return err
			}
		}
		return nil
	})
	for _, route := range []struct {
		kind, name string
		parents    []consulapi.ResourceReference
	}{
		{httpRoute.Kind, httpRoute.Name, httpRoute.Parents},
		{tcpRoute.Kind, tcpRoute.Name, tcpRoute.Parents},
	} {
		encWaitStatus(t, route.kind, route.name, func(s consulapi.ConfigEntryStatus) error {
			if err := encWantCondition(s, "Accepted", nil); err != nil {
				return err
			}
			for _, p := range route.parents {
				if err := encWantCondition(s, "Bound", &p); err != nil {
					return err
				}
			}
			return nil
		})
	}
}

// encGet reads an entry, or returns nil when it does not exist.
func encGet(t *testing.T, kind, name string) consulapi.ConfigEntry {
	t.Helper()
	entry, err := env.ConsulEntry(kind, name)
	if err != nil {
		t.Fatalf("get %s %s: %v", kind, name, err)
	}
	return entry
}

// encWaitStatus polls the entry until check accepts its status. Consul 1.15's gateway
// controller was seen, under load, never to reconcile an entry at all: no condition of
// any kind in 20s, nothing in its log. Then the entry is written again with a changed
// meta key, which makes Consul judge it again, and a second silence fails too.
func encWaitStatus(t *testing.T, kind, name string, check func(consulapi.ConfigEntryStatus) error) {
	t.Helper()
	last := encPollStatus(t, kind, name, check)
	if errors.Is(last, errNoStatus) {
		t.Logf("%s %s: Consul computed no status within 20s; writing it again to have it judged", kind, name)
		encNudge(t, kind, name)
		last = encPollStatus(t, kind, name, check)
	}
	if last != nil {
		t.Errorf("%s %s: Consul's status never became as expected: %v", kind, name, last)
	}
}

// encPollStatus polls the entry for up to 20s and returns nil once check accepts its
// status, or the last reason it did not.
func encPollStatus(t *testing.T, kind, name string, check func(consulapi.ConfigEntryStatus) error) error {
	t.Helper()
	return testenv.Poll(t.Context(), testenv.PollInterval, 20*time.Second, func(context.Context) error {
		status := consul.EntryStatus(encGet(t, kind, name))
		if len(status.Conditions) == 0 {
			return errNoStatus
		}
		return check(status)
	})
}

// encNudge writes the entry again with a meta key changed, so that Consul's gateway
// controller reconciles it again.
func encNudge(t *testing.T, kind, name string) {
	t.Helper()
	e := encGet(t, kind, name)
	if e == nil {
		t.Fatalf("%s %s is gone", kind, name)
	}
	meta := e.GetMeta()
	meta["test-nudge"] = strconv.FormatUint(e.GetModifyIndex(), 10)
	if ok, _, err := env.ConsulClient.ConfigEntries().CAS(consul.Compact(e), e.GetModifyIndex(), nil); !ok || err != nil {
		t.Fatalf("write %s %s again: %v, %v", kind, name, ok, err)
	}
}

// errNoStatus means Consul has not computed any condition for an entry yet.
var errNoStatus = errors.New("no condition computed by Consul yet")

// encWantCondition requires a True condition of type condType, for the resource ref
// (nil: the entry itself).
func encWantCondition(s consulapi.ConfigEntryStatus, condType string, ref *consulapi.ResourceReference) error {
	for _, c := range s.Conditions {
		if c.Type != condType {
			continue
		}
		if ref != nil && (c.Resource == nil || c.Resource.Kind != ref.Kind || c.Resource.Name != ref.Name || c.Resource.SectionName != ref.SectionName) {
			continue
		}
		if c.Status != consulapi.ConditionStatusTrue {
			return errors.New(condType + " is " + string(c.Status) + ": " + c.Reason + ": " + c.Message)
		}
		return nil
	}
	if ref != nil {
		return errors.New("no " + condType + " condition for " + ref.Kind + "/" + ref.Name + "/" + ref.SectionName)
	}
	return errors.New("no " + condType + " condition")
}

// Consul 1.15.4 serves one hostname per port on an api-gateway: it merges listeners on
// a port only when their protocol and hostname are equal
// (APIGatewayConfigEntry.validateMergedListeners, Consul 1.15.4 agent/structs/config_entry_gateways.go:802-812),
// which is why the Gateway's listeners on one port are written as one Consul listener.
func TestConsul115RefusesTwoHostnamesOnOnePort(t *testing.T) {
	entries := env.ConsulClient.ConfigEntries()
	meta := map[string]string{"gateway-controller": "example.com/port-test"}
	gateway := func(name, secondHostname string) *consulapi.APIGatewayConfigEntry {
		return &consulapi.APIGatewayConfigEntry{Kind: consulapi.APIGateway, Name: name, Meta: meta, Listeners: []consulapi.APIGatewayListener{
			{Name: "a", Hostname: "a.port.example.com", Port: 18580, Protocol: "http"},
			{Name: "b", Hostname: secondHostname, Port: 18580, Protocol: "http"},
		}}
	}
	t.Cleanup(func() {
		_, _ = entries.Delete(consulapi.APIGateway, "port-same", nil)
		_, _ = entries.Delete(consulapi.APIGateway, "port-different", nil)
	})
	if ok, _, err := entries.CAS(consul.Compact(gateway("port-same", "a.port.example.com")), 0, nil); !ok || err != nil {
		t.Errorf("two listeners with one hostname on a port: CAS = %v, %v; want accepted", ok, err)
	}
	ok, _, err := entries.CAS(consul.Compact(gateway("port-different", "b.port.example.com")), 0, nil)
	if ok || err == nil || !strings.Contains(err.Error(), "cannot be merged") {
		t.Errorf("two hostnames on a port: CAS = %v, %v; want Consul to refuse them as listeners that cannot be merged", ok, err)
	}
}
