// Package envoy plays a gateway's Envoy against Consul's xDS server: it fetches what
// Consul serves one proxy (Fetch), routes requests through it the way Envoy's router
// would (Route), and prints it stably for golden files (Normalize).
package envoy
