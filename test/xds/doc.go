// Package xds is what Consul would tell a gateway's Envoy.
package xds
