package options

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

// testDefaults stand for the defaults the command passes in from the parts.
var testDefaults = Defaults{
	ControllerName:       "example.com/gateway-controller",
	SecretsPerNamespace:  100,
	ServiceDefaultsGrace: 30 * time.Second,
	GatewayImage:         "example.com/consul-dataplane:1",
	GatewayGRPCPort:      8502,
}

func parse(t *testing.T, args ...string) *Options {
	t.Helper()
	o := New(testDefaults)
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	AddTo(fs, o.Flags())
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}

// The parts' defaults are the flags' defaults.
func TestNewTakesThePartsDefaults(t *testing.T) {
	o := parse(t)
	got := Defaults{
		ControllerName:       o.ControllerName,
		SecretsPerNamespace:  o.SecretsPerNamespace,
		ServiceDefaultsGrace: o.ServiceDefaultsGrace,
		GatewayImage:         o.Gateway.Image,
		GatewayGRPCPort:      o.Gateway.GRPCPort,
	}
	if diff := cmp.Diff(testDefaults, got); diff != "" {
		t.Errorf("defaults after parsing no flags (-want +got):\n%s", diff)
	}
}

// Each flag of a group lands in its own field.
func TestFlagsFillTheGroups(t *testing.T) {
	o := parse(t,
		"--consul-entry-prefix=p-", "--consul-partition=part", "--consul-mirror-namespaces", "--consul-mirror-namespaces-prefix=k8s-",
		"--leader-elect-identity=pod-0", "--leader-elect-lease-duration=20s",
		"--gateway-infrastructure-keys=example.com/*,*", "--gateway-auth-method=k8s", "--gateway-consul-address=consul.example",
		"--manage-service-defaults",
	)
	if diff := cmp.Diff(ConsulNaming{Prefix: "p-", Partition: "part", MirrorNamespaces: true, MirrorPrefix: "k8s-"}, o.Naming); diff != "" {
		t.Errorf("Naming (-want +got):\n%s", diff)
	}
	wantLeader := New(testDefaults).Leader
	wantLeader.Identity, wantLeader.LeaseDuration = "pod-0", 20*time.Second
	if diff := cmp.Diff(wantLeader, o.Leader); diff != "" {
		t.Errorf("Leader (-want +got):\n%s", diff)
	}
	wantGateway := GatewayPods{Image: testDefaults.GatewayImage, ConsulAddress: "consul.example", GRPCPort: testDefaults.GatewayGRPCPort,
		InfrastructureKeys: []string{"example.com/*", "*"}, AuthMethod: "k8s"}
	if diff := cmp.Diff(wantGateway, o.Gateway); diff != "" {
		t.Errorf("Gateway (-want +got):\n%s", diff)
	}
	if !o.ManageServiceDefaults {
		t.Error("--manage-service-defaults: ManageServiceDefaults false")
	}
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
		{[]string{"--secrets-per-namespace=0"}, "--secrets-per-namespace 0"},
		{[]string{"--kube-api-qps=0"}, "--kube-api-qps"},
		{[]string{"--secret-api-qps=-1"}, "--secret-api-qps"},
		{[]string{"--consul-mirror-namespaces", "--consul-destination-namespace=x"}, "choose one"},
		{[]string{"--consul-mirror-namespaces-prefix=k8s-"}, "needs --consul-mirror-namespaces"},
		{[]string{"--consul-mirror-namespaces", "--consul-mirror-namespaces-prefix=k8s-", "--manage-service-defaults"}, ""},
		{[]string{"--gateway-auth-method=k8s", "--deploy-gateways=false"}, "--gateway-auth-method needs --deploy-gateways"},
		{[]string{"--gateway-consul-grpc-port=0"}, "--gateway-consul-grpc-port 0"},
		// Plaintext to Consul only on loopback, or when the operator says so.
		{[]string{"--consul-http-addr=http://consul-server.consul.svc:8500"}, "consul at consul-server.consul.svc is plaintext"},
		{[]string{"--consul-http-addr=consul-server.consul.svc:8500"}, "is plaintext"},
		{[]string{"--consul-http-addr=http://consul-server.consul.svc:8500", "--consul-allow-plaintext"}, ""},
		{[]string{"--consul-http-addr=https://consul-server.consul.svc:8501"}, ""},
		{[]string{"--consul-http-addr=http://127.0.0.1:8500"}, ""},
		{[]string{"--consul-http-addr=http://[::1]:8500"}, ""},
		{[]string{"--consul-http-addr=localhost:8500"}, ""},
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

func TestConsulConfigFlagsOverrideEnvironment(t *testing.T) {
	t.Setenv("CONSUL_HTTP_ADDR", "https://from-env:8501")
	t.Setenv("CONSUL_HTTP_TOKEN", "env-token")
	t.Setenv("CONSUL_CACERT", "/env/ca.pem")
	if cfg := parse(t).Consul.Config(); cfg.Address != "https://from-env:8501" || cfg.Token != "env-token" || cfg.TLSConfig.CAFile != "/env/ca.pem" {
		t.Errorf("without flags the environment must hold: %+v", cfg)
	}
	cfg := parse(t, "--consul-http-addr=http://flag:8500", "--consul-token-file=/etc/token", "--consul-cacert=/etc/ca.pem").Consul.Config()
	if cfg.Address != "http://flag:8500" || cfg.Token != "" || cfg.TokenFile != "/etc/token" || cfg.TLSConfig.CAFile != "/etc/ca.pem" {
		t.Errorf("flags must win over the environment: address=%q tokenFile=%q token set=%v ca=%q",
			cfg.Address, cfg.TokenFile, cfg.Token != "", cfg.TLSConfig.CAFile)
	}
}
