// Package dataplane owns what a Gateway becomes in the cluster: the ServiceAccount,
// Deployment and Service of its gateway pods, which run consul-dataplane in front of
// Envoy. Desired computes them from a confirmed Gateway, its class and its
// GatewayConfig, without reading or writing anything; the Controller applies them with
// server-side apply, from the leader only, and puts back what someone else changed in
// the fields it owns.
package dataplane
