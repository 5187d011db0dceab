// Package xds checks, against real Consul, kube-apiserver and controller processes,
// that what Consul serves each gateway's Envoy means what the Gateway API objects say.
package xds
