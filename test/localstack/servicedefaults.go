package main

import (
	"fmt"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// declareHTTP writes service's service-defaults with protocol http, as a service's
// owner does in a cluster (consul-k8s's ServiceDefaults resource, or consul config
// write): Consul 1.15 accepts an http-route only to services declared http, and the
// controller, like the chart, leaves service-defaults to their owners by default.
func declareHTTP(env *testenv.Env, service string) error {
	entry := &consulapi.ServiceConfigEntry{Kind: consulapi.ServiceDefaults, Name: service, Protocol: "http"}
	if _, _, err := env.ConsulClient.ConfigEntries().Set(entry, nil); err != nil {
		return fmt.Errorf("declare %s http in Consul: %w", service, err)
	}
	fmt.Printf("Consul: service-defaults %s (protocol http), as its owner would write it\n", service)
	return nil
}
