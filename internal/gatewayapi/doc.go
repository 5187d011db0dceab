// Package gatewayapi describes the Gateway API as this controller reads it, once: each
// route kind it judges (RouteKind, Routes), and how a reference names its object
// (Referent, RefersTo). The informers, the status workers and the Consul syncer read
// routes and references through it, so that a kind or a defaulting rule is written in
// one place. It holds no state and makes no decisions.
package gatewayapi
