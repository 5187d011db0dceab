package testcerts

import (
	"crypto/x509"
	"encoding/pem"
	"testing"
)

// A certificate the CA issues verifies against the CA for each of its hosts, DNS name
// or IP address, and not against another CA or for another name.
func TestCAIssue(t *testing.T) {
	ca, err := NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewCA("other CA")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _, err := ca.Issue("server.dc1.consul", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pool := func(pemCert []byte) *x509.CertPool {
		p := x509.NewCertPool()
		if !p.AppendCertsFromPEM(pemCert) {
			t.Fatal("CA PEM not parsed")
		}
		return p
	}
	for _, tc := range []struct {
		name   string
		roots  []byte
		host   string
		wantOK bool
	}{
		{"DNS name", ca.CertPEM, "server.dc1.consul", true},
		{"IP address", ca.CertPEM, "127.0.0.1", true},
		{"another name", ca.CertPEM, "other.dc1.consul", false},
		{"another CA", other.CertPEM, "server.dc1.consul", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cert.Verify(x509.VerifyOptions{Roots: pool(tc.roots), DNSName: tc.host})
			if (err == nil) != tc.wantOK {
				t.Errorf("Verify for %s: %v, want ok = %v", tc.host, err, tc.wantOK)
			}
		})
	}
}
