package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/leader"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/options"
)

var update = flag.Bool("update", false, "rewrite docs/flags.md")

// TestFlagsDocIsCurrent fails when docs/flags.md no longer shows what --help prints;
// `go test . -update` rewrites it.
func TestFlagsDocIsCurrent(t *testing.T) {
	var help bytes.Buffer
	if opts, code := parseFlags([]string{"--help"}, &help); opts != nil || code != 0 {
		t.Fatalf("--help: settings %v, exit code %d; want none and 0", opts != nil, code)
	}
	want := "# Flags\n\nGenerated from `consul-gateway-controller --help` by `go test . -update`.\n\n```\n" + help.String() + "```\n"
	path := filepath.Join("docs", "flags.md")
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run `go test . -update`)", err)
	}
	if string(got) != want {
		t.Errorf("docs/flags.md is stale: run `go test . -update`")
	}
}

func mustParse(t *testing.T, args ...string) *options.Options {
	t.Helper()
	var stderr bytes.Buffer
	opts, code := parseFlags(args, &stderr)
	if opts == nil {
		t.Fatalf("parseFlags(%q): exit code %d: %s", args, code, stderr.String())
	}
	return opts
}

// Flags that do not parse, and settings the parts' rules refuse, stop the process
// with exit code 2 and every problem said.
func TestParseFlagsRefuses(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"--no-such-flag"}, []string{"unknown flag: --no-such-flag"}},
		// The parts' rules, and package options' own, in one message.
		{[]string{"--cluster-id=" + strings.Repeat("x", 513), "--route-workers=0"}, []string{"--cluster-id: cluster id is longer", "--route-workers 0"}},
		{[]string{"--gateway-infrastructure-keys=example.*"}, []string{"--gateway-infrastructure-keys \"example.*\""}},
		{[]string{"--gateway-image-rollout-limit=0"}, []string{"--gateway-image-rollout-limit \"0\" allows no Deployment to roll"}},
		{[]string{"--gateway-image-rollout-limit=ten"}, []string{"--gateway-image-rollout-limit \"ten\" is neither a number nor a percentage"}},
		{[]string{"--leader-elect-identity=pod-0", "--leader-elect-retry-period=0s"}, []string{"--leader-elect-*: want 0 < retry period"}},
		{[]string{"--memory-limit=half"}, []string{"--memory-limit \"half\": want a quantity of bytes"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stderr bytes.Buffer
			opts, code := parseFlags(tt.args, &stderr)
			if opts != nil || code != 2 {
				t.Errorf("settings returned %v, exit code %d; want none and 2", opts != nil, code)
			}
			for _, want := range tt.want {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr %q does not say %q", stderr.String(), want)
				}
			}
		})
	}
}

// Without leader election the Lease timing is not checked: nothing campaigns.
func TestParseFlagsSkipsTheLeaseWithoutElection(t *testing.T) {
	mustParse(t, "--leader-elect=false", "--leader-elect-retry-period=0s")
}

// What the flags say reaches the parts' settings.
func TestFlagsReachTheParts(t *testing.T) {
	t.Setenv("CONSUL_HTTP_SSL", "")
	opts := mustParse(t,
		"--controller-name=example.com/gw", "--cluster-id=c1",
		"--consul-http-addr=https://consul.example:8501",
		"--consul-entry-prefix=p-", "--consul-partition=part", "--consul-mirror-namespaces", "--consul-mirror-namespaces-prefix=k8s-",
		"--gateway-image=img:1", "--gateway-consul-grpc-port=8503", "--gateway-auth-method=k8s", "--gateway-infrastructure-keys=example.com/*",
		"--leader-elect-identity=pod-0",
	)
	if diff := cmp.Diff(translate.Ownership{Controller: "example.com/gw", ClusterID: "c1"}, ownership(opts)); diff != "" {
		t.Errorf("ownership (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(translate.Naming{Prefix: "p-", Partition: "part", MirrorNamespaces: true, MirrorPrefix: "k8s-"}, naming(opts)); diff != "" {
		t.Errorf("naming (-want +got):\n%s", diff)
	}
	wantGateway := dataplane.Defaults{
		Image: "img:1", ConsulAddress: "consul.example", GRPCPort: 8503, AuthMethod: "k8s",
		NodePrefix: "p-" + dataplane.SyntheticNodePrefix, TLS: true,
		InfrastructureKeys: gatewayapi.KeyAllowlist{"example.com/*"},
	}
	if diff := cmp.Diff(wantGateway, gatewayDefaults(opts)); diff != "" {
		t.Errorf("gatewayDefaults (-want +got):\n%s", diff)
	}
	wantLeader := leader.Config{
		Namespace: "consul-gateway-controller", Name: "consul-gateway-controller", Identity: "pod-0",
		LeaseDuration: opts.Leader.LeaseDuration, RenewDeadline: opts.Leader.RenewDeadline, RetryPeriod: opts.Leader.RetryPeriod,
	}
	if diff := cmp.Diff(wantLeader, leaderConfig(opts)); diff != "" {
		t.Errorf("leaderConfig (-want +got):\n%s", diff)
	}
}

// An unset Lease identity is the pod's name.
func TestLeaderIdentityIsThePodName(t *testing.T) {
	t.Setenv("HOSTNAME", "controller-7d9f-abcde")
	if got := leaderConfig(mustParse(t)).Identity; got != "controller-7d9f-abcde" {
		t.Errorf("identity %q, want $HOSTNAME", got)
	}
}

// Gateway pods speak TLS to Consul when the controller does.
func TestGatewayDefaultsFollowTheControllersTLS(t *testing.T) {
	for addr, want := range map[string]bool{"https://consul:8501": true, "http://127.0.0.1:8500": false, "127.0.0.1:8500": false} {
		if got := gatewayDefaults(mustParse(t, "--consul-http-addr="+addr)).TLS; got != want {
			t.Errorf("Consul at %s: gateway TLS %v, want %v", addr, got, want)
		}
	}
	t.Setenv("CONSUL_HTTP_SSL", "true")
	if !gatewayDefaults(mustParse(t, "--consul-http-addr=consul:8501")).TLS {
		t.Error("CONSUL_HTTP_SSL=true: gateway TLS off")
	}
}

// --memory-limit, the container's limit as the downward API gives it (bytes), sets
// Go's soft limit to 90% of it, unless GOMEMLIMIT says otherwise.
func TestMemoryLimit(t *testing.T) {
	for _, tt := range []struct {
		flag       string
		gomemlimit bool
		want       int64
	}{
		{flag: "536870912", want: 483183819},
		{flag: "512Mi", want: 483183819},
		{flag: "512Mi", gomemlimit: true, want: 0},
		{flag: "0", want: 0},
		{flag: "", want: 0},
	} {
		limit, err := mustParse(t, "--memory-limit="+tt.flag).MemoryLimitBytes()
		if err != nil {
			t.Fatal(err)
		}
		if got := goMemoryLimit(limit, tt.gomemlimit); got != tt.want {
			t.Errorf("--memory-limit=%s, GOMEMLIMIT set %v: soft limit %d, want %d", tt.flag, tt.gomemlimit, got, tt.want)
		}
	}
}
