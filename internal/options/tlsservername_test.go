package options

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConsulTLSServerName: a Consul on loopback whose certificate names only
// server.dc1.consul, as consul-k8s's server certificates do, is refused by its IP
// address and reached with --consul-tls-server-name=server.dc1.consul, which the
// client also sends as SNI.
func TestConsulTLSServerName(t *testing.T) {
	t.Setenv("CONSUL_TLS_SERVER_NAME", "")
	const serverName = "server.dc1.consul"
	caFile, cert := serverCertificate(t, serverName)
	var sni string
	server := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`"127.0.0.1:8300"`))
	}))
	server.TLS = &tls.Config{
		Certificates: []tls.Certificate{cert},
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			sni = hello.ServerName
			return nil, nil
		},
	}
	server.StartTLS()
	defer server.Close()

	leader := func(conn ConsulConnection) error {
		client, err := conn.Client()
		if err != nil {
			return err
		}
		_, err = client.Status().Leader()
		return err
	}
	conn := ConsulConnection{HTTPAddr: server.URL, CACert: caFile}
	if err := leader(conn); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without a server name: %v, want a certificate error", err)
	}
	conn.TLSServerName = serverName
	if err := leader(conn); err != nil {
		t.Errorf("with --consul-tls-server-name=%s: %v", serverName, err)
	}
	if sni != serverName {
		t.Errorf("SNI %q, want %q", sni, serverName)
	}
}

// serverCertificate is a self-signed certificate for dnsName only (no IP address),
// and the file holding it as the client's CA.
func serverCertificate(t *testing.T, dnsName string) (string, tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: dnsName},
		DNSNames:              []string{dnsName},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return caFile, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
