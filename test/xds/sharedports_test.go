package xds

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/testcerts"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/xds/envoy"
)

// sharedPorts: Gateway listeners with different hostnames on one port are one Consul
// listener. Envoy picks the virtual host by exact hostname, then the longest wildcard,
// which is the Gateway API's listener precedence; a route attached to one listener is
// not served on another's hostname.
var sharedPorts = scenario{
	name: "sharedports", namespace: "xds-sharedports", ports: []uint32{80, 8080},
	requests: []routeCase{
		{80, envoy.Request{Host: "bar.com", Target: "/"}, to("sp-v1")},
		{80, envoy.Request{Host: "bar.com:80", Target: "/"}, to("sp-v1")},
		{80, envoy.Request{Host: "foo.bar.com", Target: "/"}, to("sp-v2")},
		{80, envoy.Request{Host: "baz.bar.com", Target: "/"}, to("sp-v3")},
		{80, envoy.Request{Host: "multiple.prefixes.bar.com", Target: "/"}, to("sp-v3")},
		// The second wildcard, by its :authority match in the catch-all virtual host.
		{80, envoy.Request{Host: "x.foo.com", Target: "/foo/x"}, to("sp-v4")},
		{80, envoy.Request{Host: "multiple.prefixes.foo.com:80", Target: "/foo"}, to("sp-v4")},
		{80, envoy.Request{Host: "X.FOO.COM", Target: "/foo"}, to("sp-v4")},
		{80, envoy.Request{Host: "x.foo.com", Target: "/"}, nil},
		{80, envoy.Request{Host: "x.bar.com", Target: "/foo"}, to("sp-v3")},
		// Hostnames no listener has.
		{80, envoy.Request{Host: "foo.com", Target: "/foo"}, nil},
		{80, envoy.Request{Host: "xbar.com", Target: "/"}, nil},
		{8080, envoy.Request{Host: "first.com", Target: "/"}, to("sp-both")},
		{8080, envoy.Request{Host: "second.com", Target: "/x"}, to("sp-both")},
		{8080, envoy.Request{Host: "sub.first.com", Target: "/"}, nil},
		{8080, envoy.Request{Host: "bar.com", Target: "/"}, nil},
	},
}

// sharedTLS: HTTPS listeners of one port with a certificate each are one Consul
// listener when Consul's SNI filter chains give each listener's clients its own
// certificate; a listener whose certificate Consul cannot match by SNI is refused.
var sharedTLS = scenario{
	name: "sharedtls", namespace: "xds-sharedtls", ports: []uint32{443},
	requests: []routeCase{
		{443, envoy.Request{Host: "a.example.com", Target: "/"}, to("tls-a")},
		{443, envoy.Request{Host: "b.example.com", Target: "/"}, to("tls-b")},
		{443, envoy.Request{Host: "c.example.com", Target: "/"}, nil},
	},
}

func TestSharedPorts(t *testing.T) {
	setup(t)
	t.Run("hostnames", func(t *testing.T) {
		t.Parallel()
		sharedPorts.run(t)
		awaitListenerReasons(t, sharedPorts.namespace, map[string]string{
			"bar": "True/Accepted", "foo-bar": "True/Accepted", "wild-bar": "True/Accepted", "wild-foo": "True/Accepted", "nested": "False/PortUnavailable",
			"first": "True/Accepted", "second": "True/Accepted",
		})
	})
	t.Run("certificates", func(t *testing.T) {
		t.Parallel()
		s := sharedTLS
		// The conformance suite's certificates: common name "default", the host as
		// the one DNS name. Consul leaves "default" out of SNI matching (two have it).
		if err := kubectlApply(filepath.Join("testdata", s.name+".yaml")); err != nil {
			t.Fatal(err)
		}
		certs := map[string][]byte{}
		for name, host := range map[string]string{"cert-a": "a.example.com", "cert-b": "b.example.com"} {
			cert, key, err := testcerts.SelfSignedNamed("default", host)
			if err != nil {
				t.Fatal(err)
			}
			certs[host] = cert
			env.Create(t, testenv.TLSSecret(s.namespace, name, cert, key))
		}
		cert, key := testenv.SelfSigned(t, "c.example.com") // common name and DNS name
		env.Create(t, testenv.TLSSecret(s.namespace, "cert-c", cert, key))

		backends := registerBackends(t, s.namespace, 0)
		awaitListenerReasons(t, s.namespace, map[string]string{"a": "True/Accepted", "b": "True/Accepted", "c": "False/PortUnavailable"})
		awaitProgrammed(t, s.namespace, "edge")
		proxy := gatewayProxy(t, s.namespace, "edge")
		cfg := s.fetchUntil(t, proxy, func(cfg *envoy.Config) error {
			return errors.Join(s.check(cfg, backends, nil), checkServerCertificates(cfg, 443, certs))
		})
		replace := map[string]string{proxy.ID: "GATEWAY-POD"}
		for _, ip := range podIPs(t, s.namespace) {
			replace[ip] = "GATEWAY-POD-IP"
		}
		compareGolden(t, filepath.Join("testdata", s.name+".golden.json"), cfg, replace)
	})
}

// checkServerCertificates: a TLS client asking for each host gets the certificate of
// that host's listener.
func checkServerCertificates(cfg *envoy.Config, port uint32, certs map[string][]byte) error {
	var errs []error
	for host, want := range certs {
		got, err := envoy.ServerCertificate(cfg, port, host)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(want)) {
			errs = append(errs, fmt.Errorf("port %d, server name %q: another certificate is served", port, host))
		}
	}
	return errors.Join(errs...)
}

// awaitListenerReasons waits until each listener of the Gateway "edge" in ns has the
// Accepted condition want gives it ("Status/Reason").
func awaitListenerReasons(t *testing.T, ns string, want map[string]string) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, "the listener conditions of "+ns+"/edge", func(ctx context.Context) error {
		gw, err := env.GatewayClient.GatewayV1().Gateways(ns).Get(ctx, "edge", metav1.GetOptions{})
		if err != nil {
			return err
		}
		var errs []error
		for name, reason := range want {
			found := false
			for _, l := range gw.Status.Listeners {
				if string(l.Name) != name {
					continue
				}
				found = true
				if got := testenv.ConditionReason(l.Conditions, "Accepted"); got != reason {
					errs = append(errs, fmt.Errorf("listener %s: Accepted is %s, want %s", name, testenv.ConditionText(l.Conditions, "Accepted"), reason))
				}
			}
			if !found {
				errs = append(errs, fmt.Errorf("listener %s: no status", name))
			}
		}
		return errors.Join(errs...)
	})
}
