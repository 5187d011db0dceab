// Package envoy plays a gateway's Envoy against Consul's xDS server. It keeps a Delta
// ADS stream open for one proxy (Watch, Fetch; WatchWith and FetchWith over TLS and
// with an ACL token, as consul-dataplane connects) and applies what Consul sends as
// Envoy does, refusing (NACKing) what Envoy's own checks refuse; it answers requests
// and connections from the configuration the way Envoy's listeners, router and load
// balancer would (ServeHTTP, ServeTCP, Route), refusing to guess where the model stops;
// and it prints a configuration stably for golden files (Normalize, Summarize).
package envoy
