package options

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

var update = flag.Bool("update", false, "rewrite docs/flags.md")

// TestFlagsDocIsCurrent fails when docs/flags.md no longer shows what --help prints;
// `go test ./internal/options -update` rewrites it.
func TestFlagsDocIsCurrent(t *testing.T) {
	var help bytes.Buffer
	Usage(&help, New().Flags())
	want := "# Flags\n\nGenerated from `consul-gateway-controller --help` by `go test ./internal/options -update`.\n\n```\n" + help.String() + "```\n"
	path := filepath.Join("..", "..", "docs", "flags.md")
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run `go test ./internal/options -update`)", err)
	}
	if string(got) != want {
		t.Errorf("docs/flags.md is stale: run `go test ./internal/options -update`")
	}
}

func parse(t *testing.T, args ...string) *Options {
	t.Helper()
	o := New()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	AddTo(fs, o.Flags())
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}

func TestValidate(t *testing.T) {
	tests := []struct {
		args []string
		want string // "" for valid
	}{
		{nil, ""},
		{[]string{"--controller-name=no-slash"}, "--controller-name"},
		{[]string{"--route-workers=0"}, "--route-workers 0"},
		{[]string{"--consul-workers=-1"}, "--consul-workers -1"},
		{[]string{"--kube-api-qps=0"}, "--kube-api-qps"},
		{[]string{"--cluster-id=" + strings.Repeat("x", 513)}, "--cluster-id"},
		{[]string{"--consul-mirror-namespaces", "--consul-destination-namespace=x"}, "choose one"},
		{[]string{"--consul-mirror-namespaces-prefix=k8s-"}, "needs --consul-mirror-namespaces"},
		{[]string{"--consul-mirror-namespaces", "--consul-mirror-namespaces-prefix=k8s-", "--manage-service-defaults"}, ""},
		// Plaintext to Consul only on loopback, or when the operator says so.
		{[]string{"--consul-http-addr=http://consul-server.consul.svc:8500"}, "consul at consul-server.consul.svc is plaintext"},
		{[]string{"--consul-http-addr=consul-server.consul.svc:8500"}, "is plaintext"},
		{[]string{"--consul-http-addr=http://consul-server.consul.svc:8500", "--consul-allow-plaintext"}, ""},
		{[]string{"--consul-http-addr=https://consul-server.consul.svc:8501"}, ""},
		{[]string{"--consul-http-addr=http://127.0.0.1:8500"}, ""},
		{[]string{"--consul-http-addr=http://[::1]:8500"}, ""},
		{[]string{"--consul-http-addr=localhost:8500"}, ""},
		{[]string{"--gateway-infrastructure-keys=example.com/*,*"}, ""},
		{[]string{"--gateway-infrastructure-keys=example.*"}, "--gateway-infrastructure-keys"},
		{[]string{"--metrics-auth=none"}, ""},
		{[]string{"--metrics-auth=kubernetes"}, ""},
		{[]string{"--metrics-auth=token"}, "--metrics-auth"},
		{[]string{"--profiling"}, ""},
		{[]string{"--profiling", "--profiling-bind-address=127.0.0.1:0"}, ""},
		{[]string{"--profiling", "--profiling-bind-address=[::1]:6060"}, ""},
		{[]string{"--profiling", "--profiling-bind-address=localhost:6060"}, ""},
		{[]string{"--profiling", "--profiling-bind-address=0"}, ""},
		{[]string{"--profiling", "--profiling-bind-address=:6060"}, "not a loopback address"},
		{[]string{"--profiling", "--profiling-bind-address=0.0.0.0:6060"}, "not a loopback address"},
		{[]string{"--profiling", "--profiling-bind-address=10.0.0.7:6060"}, "not a loopback address"},
		{[]string{"--profiling", "--profiling-bind-address=[::]:6060"}, "not a loopback address"},
		{[]string{"--profiling", "--profiling-bind-address=pod.example:6060"}, "not a loopback address"},
		{[]string{"--profiling", "--profiling-bind-address=6060"}, "--profiling-bind-address"},
		{[]string{"--profiling", "--profiling-bind-address=:6060", "--profiling-allow-non-loopback"}, ""},
		// Without --profiling nothing listens there.
		{[]string{"--profiling-bind-address=:6060"}, ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			err := parse(t, tt.args...).Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate() = %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}

// Gateway pods speak TLS to Consul when the controller does.
func TestGatewayDefaultsFollowTheControllersTLS(t *testing.T) {
	for addr, want := range map[string]bool{"https://consul:8501": true, "http://127.0.0.1:8500": false, "127.0.0.1:8500": false} {
		if got := parse(t, "--consul-http-addr="+addr).GatewayDefaults().TLS; got != want {
			t.Errorf("Consul at %s: gateway TLS %v, want %v", addr, got, want)
		}
	}
	t.Setenv("CONSUL_HTTP_SSL", "true")
	if !parse(t, "--consul-http-addr=consul:8501").GatewayDefaults().TLS {
		t.Error("CONSUL_HTTP_SSL=true: gateway TLS off")
	}
}

func TestConsulConfigFlagsOverrideEnvironment(t *testing.T) {
	t.Setenv("CONSUL_HTTP_ADDR", "https://from-env:8501")
	t.Setenv("CONSUL_HTTP_TOKEN", "env-token")
	t.Setenv("CONSUL_CACERT", "/env/ca.pem")
	if cfg := parse(t).ConsulConfig(); cfg.Address != "https://from-env:8501" || cfg.Token != "env-token" || cfg.TLSConfig.CAFile != "/env/ca.pem" {
		t.Errorf("without flags the environment must hold: %+v", cfg)
	}
	cfg := parse(t, "--consul-http-addr=http://flag:8500", "--consul-token-file=/etc/token", "--consul-cacert=/etc/ca.pem").ConsulConfig()
	if cfg.Address != "http://flag:8500" || cfg.Token != "" || cfg.TokenFile != "/etc/token" || cfg.TLSConfig.CAFile != "/etc/ca.pem" {
		t.Errorf("flags must win over the environment: address=%q tokenFile=%q token set=%v ca=%q",
			cfg.Address, cfg.TokenFile, cfg.Token != "", cfg.TLSConfig.CAFile)
	}
}
