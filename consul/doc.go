// Package consul owns everything the controller writes to Consul: the pure translation
// from confirmed Kubernetes objects to config entries, the check-and-set writer that
// keeps Consul equal to that and removes only entries it owns, and the watch that puts
// back what drifted.
package consul
