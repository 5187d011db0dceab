//go:build tools

// Package envoygateway is a module of its own that pins Envoy Gateway's controller, the
// peer the bench compares the controller with. It is never imported by the product:
// the bench builds github.com/envoyproxy/gateway/cmd/envoy-gateway from this directory.
package envoygateway

import _ "github.com/envoyproxy/gateway/cmd/envoy-gateway"
