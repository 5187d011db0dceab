// Package consul owns everything the controller writes to Consul: the pure translation
// from confirmed Kubernetes objects to config entries, the check-and-set writer that
// keeps Consul equal to that and removes only entries it owns, and the watch that puts
// back what drifted.
//
// Words used throughout: an entry is a Consul config entry; the desired state is the
// translation of the confirmed objects (the objects whose status the API server holds
// as the status pipeline decided; see package sync); a verdict is Consul's Accepted
// condition on an entry of ours (and, on a route's entry, its Bound condition per
// parent listener), or the syncer's reason why the entry could not be written,
// reported back to the object's status; drift is an entry of ours that Consul holds
// with other content than desired.
package consul
