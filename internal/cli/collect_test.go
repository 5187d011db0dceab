package cli

import (
	"strings"
	"testing"
)

// Every file of a bundle goes through the redactor: PEM private keys of any type and
// the credentials the command holds become REDACTED; certificates stay.
func TestRedactorRemovesKeysAndCredentials(t *testing.T) {
	var r redactor
	r.addSecret("  s3cr3t-token\n") // as read from a token file
	r.addSecret("")
	in := strings.Join([]string{
		"-----BEGIN CERTIFICATE-----\nMIIBcert\n-----END CERTIFICATE-----",
		"-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIkey\n-----END EC PRIVATE KEY-----",
		`{"PrivateKey": "-----BEGIN PRIVATE KEY-----\nMIGHAgEAkey\n-----END PRIVATE KEY-----\n"}`,
		"X-Consul-Token: s3cr3t-token",
	}, "\n")
	got := string(r.apply([]byte(in)))
	for _, gone := range []string{"MHcCAQEEIkey", "MIGHAgEAkey", "s3cr3t-token", "PRIVATE KEY"} {
		if strings.Contains(got, gone) {
			t.Errorf("the redacted text holds %q:\n%s", gone, got)
		}
	}
	if !strings.Contains(got, "MIIBcert") || strings.Count(got, redacted) != 3 {
		t.Errorf("want the certificate kept and 3 redactions:\n%s", got)
	}
}
