// Command bench is `make bench`: it starts its own etcd, kube-apiserver and Consul with
// the test harness, runs the controller binary as a process against them, and measures
// a cold start (at the default and a high client QPS), a restart, a failover between two
// replicas, the latency of route edits and the controller's memory, each next to a
// baseline from the same run. It prints one markdown table and writes docs/bench.md and
// docs/bench.svg.
//
// It is a command rather than a test: its figures are reported, never asserted.
package main
