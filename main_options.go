package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/consullimits"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/leader"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/options"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
)

// This file is what the flags mean to the controller's parts: package options holds
// them as plain values, and the functions here turn them into the parts' settings and
// check them against the parts' rules.

// flagDefaults are the defaults of the flags whose values the parts own.
func flagDefaults() options.Defaults {
	return options.Defaults{
		ControllerName:           string(gwsync.DefaultControllerName),
		SecretsPerNamespace:      informers.DefaultSecretsPerNamespace,
		ServiceDefaultsGrace:     consul.ServiceDefaultsGrace,
		GatewayImage:             v1alpha1.DefaultImage,
		GatewayGRPCPort:          v1alpha1.DefaultGRPCPort,
		GatewayImageRolloutLimit: dataplane.DefaultImageRolloutLimit,
	}
}

// parseFlags returns the controller's settings from args, or nil and the code to exit
// with: 0 after --help, 2 for flags that do not parse or are invalid (said on stderr).
func parseFlags(args []string, stderr io.Writer) (*options.Options, int) {
	opts := options.New(flagDefaults())
	fss := opts.Flags()
	fs := pflag.NewFlagSet("consul-gateway-controller", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	options.AddTo(fs, fss)
	fs.Usage = func() { options.Usage(stderr, fss) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, 0
		}
		fmt.Fprintf(stderr, "consul-gateway-controller: %v\n", err)
		return nil, 2
	}
	if err := checkFlags(opts); err != nil {
		fmt.Fprintf(stderr, "consul-gateway-controller: invalid flags: %s\n", strings.ReplaceAll(err.Error(), "\n", "; "))
		return nil, 2
	}
	return opts, 0
}

// checkFlags returns every invalid setting: those package options judges, and those
// the parts' own rules refuse.
func checkFlags(opts *options.Options) error {
	errs := []error{opts.Validate()}
	// An empty cluster ID is derived at start (resolveClusterID).
	if opts.ClusterID != "" {
		if err := ownership(opts).Validate(); err != nil {
			errs = append(errs, fmt.Errorf("--cluster-id: %w", err))
		}
	}
	if opts.LeaderElect {
		if err := leaderConfig(opts).Validate(); err != nil {
			errs = append(errs, fmt.Errorf("--leader-elect-*: %w", err))
		}
	}
	if _, err := dataplane.ParseImageRolloutLimit(opts.Gateway.ImageRolloutLimit); err != nil {
		errs = append(errs, fmt.Errorf("--gateway-image-rollout-limit %w", err))
	}
	for _, problem := range infrastructureKeys(opts).Validate() {
		errs = append(errs, fmt.Errorf("--gateway-infrastructure-keys %s", problem))
	}
	return errors.Join(errs...)
}

// leaderConfig is the election's configuration; an unset identity is the pod name in
// a cluster ($HOSTNAME), else the host name.
func leaderConfig(opts *options.Options) leader.Config {
	l := opts.Leader
	cfg := leader.Config{
		Namespace: l.Namespace, Name: l.Name, Identity: l.Identity,
		LeaseDuration: l.LeaseDuration, RenewDeadline: l.RenewDeadline, RetryPeriod: l.RetryPeriod,
	}
	if cfg.Identity == "" {
		cfg.Identity = os.Getenv("HOSTNAME")
	}
	if cfg.Identity == "" {
		cfg.Identity, _ = os.Hostname()
	}
	return cfg
}

// ownership is how the entries this controller writes are marked as its own.
func ownership(opts *options.Options) translate.Ownership {
	return translate.Ownership{Controller: opts.ControllerName, ClusterID: opts.ClusterID}
}

// translateOptions are the translation's choices: the responder, when there is one,
// answers what the blackhole would.
func translateOptions(opts *options.Options) translate.Options {
	return translate.Options{
		ManageServiceDefaults: opts.ManageServiceDefaults,
		Responder:             naming(opts).Responder(opts.ResponderService),
	}
}

// capabilities are what the status pipeline accepts: Consul 1.15's, and
// RequestRedirect when a responder answers it.
func capabilities(opts *options.Options) consullimits.Capabilities {
	return consullimits.Consul115.WithResponder(opts.ResponderService)
}

// naming is where in Consul the entries go and how they are named.
func naming(opts *options.Options) translate.Naming {
	n := opts.Naming
	return translate.Naming{
		Prefix: n.Prefix, Partition: n.Partition, DestinationNamespace: n.DestinationNamespace,
		MirrorNamespaces: n.MirrorNamespaces, MirrorPrefix: n.MirrorPrefix,
	}
}

// infrastructureKeys are the spec.infrastructure keys that reach gateway objects.
func infrastructureKeys(opts *options.Options) gatewayapi.KeyAllowlist {
	return gatewayapi.KeyAllowlist(opts.Gateway.InfrastructureKeys)
}

// imageRolloutLimit is --gateway-image-rollout-limit, which checkFlags judged.
func imageRolloutLimit(opts *options.Options) intstr.IntOrString {
	limit, _ := dataplane.ParseImageRolloutLimit(opts.Gateway.ImageRolloutLimit)
	return limit
}

// gatewayDefaults are the defaults of gateway pods. Their Consul address falls back to
// the host the controller's own Consul client talks to, they speak TLS unless the
// controller itself talks to Consul in clear (on loopback, or allowed), and their
// Consul nodes start with the entry prefix, so one ACL rule (node_prefix) covers a
// controller's nodes.
func gatewayDefaults(opts *options.Options) dataplane.Defaults {
	g := opts.Gateway
	d := dataplane.Defaults{
		Image:              g.Image,
		ConsulAddress:      g.ConsulAddress,
		GRPCPort:           g.GRPCPort,
		AuthMethod:         g.AuthMethod,
		NodePrefix:         opts.Naming.Prefix + dataplane.SyntheticNodePrefix,
		TLS:                opts.Consul.TLS(),
		InfrastructureKeys: infrastructureKeys(opts),
	}
	if d.ConsulAddress == "" {
		d.ConsulAddress = opts.Consul.Host()
	}
	return d
}

// setMemoryLimit sets Go's soft memory limit to goMemoryLimit of --memory-limit.
func setMemoryLimit(ctx context.Context, opts *options.Options) {
	container, _ := opts.MemoryLimitBytes() // checked by Validate
	_, fromEnv := os.LookupEnv("GOMEMLIMIT")
	limit := goMemoryLimit(container, fromEnv)
	if limit == 0 {
		return
	}
	debug.SetMemoryLimit(limit)
	klog.FromContext(ctx).V(2).Info("Set Go's soft memory limit", "bytes", limit, "memoryLimit", opts.MemoryLimit)
}

// goMemoryLimit is the soft memory limit for a container limit of container bytes: 90%
// of it, leaving room for what the Go runtime does not count (thread stacks of cgo,
// the binary's mapped pages) and for the collector to catch up before the kernel's
// OOM killer. 0 means leave the runtime's own: no container limit, or GOMEMLIMIT set
// (the runtime has read it, and an operator's explicit setting wins).
func goMemoryLimit(container int64, gomemlimitSet bool) int64 {
	if container <= 0 || gomemlimitSet {
		return 0
	}
	return container / 10 * 9
}
