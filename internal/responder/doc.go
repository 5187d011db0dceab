// Package responder is the responder: a Consul-native (connect-native) HTTP service
// that answers what Consul 1.15's http-route cannot, a fixed 500 and a
// RequestRedirect, for the rules the translation sends to it with a directive
// (package directive).
//
// It takes its identity from Consul, as a connect-native service does: its leaf
// certificate (the agent's /v1/agent/connect/ca/leaf/<service>) and the roots that
// sign callers' certificates (/v1/agent/connect/ca/roots), each followed with a
// blocking query so that rotations take effect without a restart. It accepts only
// mTLS connections whose client certificate the roots sign and whose SPIFFE ID
// Consul's intentions allow to reach it (/v1/agent/connect/authorize): a gateway's
// Envoy connects with the gateway's leaf, as it does to any mesh service. It
// registers itself in Consul's catalog as a connect-native instance with a TTL check
// it keeps passing, so that a responder that stops is taken out of the gateways'
// endpoints, and, past a grace, out of the catalog.
//
// A rule sends to the responder only what Gateway API answers without a backend;
// no healthy backend of a route is in the same cluster as the responder, so a
// responder that fails takes down those answers and nothing else.
package responder
