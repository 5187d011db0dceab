// Package informers owns the controller's view of the cluster: the shared informer
// factories for the Gateway API and core kinds, the transforms that trim what they
// cache, the indexers that answer "which objects refer to this one", and the event
// handlers that map each event to the queue keys it affects. It makes no decisions.
//
// New builds every informer and its indexes (factory.go, indexers.go); KeyMapper makes
// the event handlers that feed the work queues (handlers.go), mapping each change to
// the keys it affects (keys.go); the status controller registers them on the informers
// it reads. StartWithContext runs the informers. Workers wait for HasSynced: a decision
// made on a half-filled cache reports objects missing that merely have not arrived yet.
//
// Secrets are not an informer over the cluster: SecretCache (secrets.go, secret*.go) holds only the
// kubernetes.io/tls Secrets that a Gateway or ListenerSet listener names, one watch per
// Secret, started and stopped as the Gateway and ListenerSet events add and drop
// references, so Secrets nobody refers to cost nothing however many or large they are.
// No cached object keeps managedFields.
package informers
