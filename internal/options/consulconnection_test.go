package options

import (
	"strings"
	"testing"
)

// TestConsulConnectionRefusesPlaintext: the check the controller and its read-only
// commands share refuses a Consul off loopback without TLS, unless allowed, and
// Client makes no client then. Nothing is dialed: making a consul/api client sends
// nothing, and the refused one is never made.
func TestConsulConnectionRefusesPlaintext(t *testing.T) {
	t.Setenv("CONSUL_HTTP_ADDR", "")
	t.Setenv("CONSUL_HTTP_SSL", "")
	tests := []struct {
		conn    ConsulConnection
		wantErr string
	}{
		{ConsulConnection{HTTPAddr: "http://10.0.0.1:8500"}, "consul at 10.0.0.1 is plaintext"},
		{ConsulConnection{HTTPAddr: "consul-server.consul.svc:8500"}, "consul at consul-server.consul.svc is plaintext"},
		{ConsulConnection{HTTPAddr: "http://10.0.0.1:8500", AllowPlaintext: true}, ""},
		{ConsulConnection{HTTPAddr: "https://10.0.0.1:8501"}, ""},
		{ConsulConnection{HTTPAddr: "http://127.0.0.1:8500"}, ""},
		{ConsulConnection{HTTPAddr: "http://[::1]:8500"}, ""},
		{ConsulConnection{HTTPAddr: "http://localhost:8500"}, ""},
		{ConsulConnection{}, ""}, // consul/api's default, 127.0.0.1:8500
	}
	for _, tt := range tests {
		client, err := tt.conn.Client()
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%+v: %v, want a client", tt.conn, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%+v: error %v, want %q", tt.conn, err, tt.wantErr)
		case tt.wantErr != "" && client != nil:
			t.Errorf("%+v: a client was made for a refused connection", tt.conn)
		}
	}
}

// TestConsulConnectionIsTheControllers: the controller's options give the connection
// its flags describe, so the controller and the commands check the same thing.
func TestConsulConnectionIsTheControllers(t *testing.T) {
	o := New(testDefaults)
	fss := o.Flags()
	fs := fss.FlagSet("consul")
	if err := fs.Parse([]string{"--consul-http-addr=http://10.0.0.1:8500", "--consul-token-file=token", "--consul-cacert=ca.pem"}); err != nil {
		t.Fatal(err)
	}
	want := ConsulConnection{HTTPAddr: "http://10.0.0.1:8500", TokenFile: "token", CACert: "ca.pem"}
	if got := o.Consul; got != want {
		t.Errorf("Consul = %+v, want %+v", got, want)
	}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "consul at 10.0.0.1 is plaintext") {
		t.Errorf("Validate: %v, want the plaintext refusal", err)
	}
}
