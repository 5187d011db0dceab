// Package informers owns the controller's view of the cluster: the shared informer
// factories for the Gateway API and core kinds, the transforms that trim what they
// cache, the indexers that answer "which objects refer to this one", and the event
// handlers that map each event to the queue keys it affects. It makes no decisions.
package informers
