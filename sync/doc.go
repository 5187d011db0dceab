// Package sync owns the Gateway API decisions: pure functions that compute each object's
// status from cached data (listener validation, route binding, hostname intersection,
// ReferenceGrant checks, conditions), and the workers that write that status with the
// lister's resourceVersion and publish what the API server confirmed.
//
// The workers are four files: controller.go (the queues, the event handlers and Run),
// sync.go (one sync per kind), write.go (the status writes and what is published) and
// recorder.go (Events). Every other file decides: it reads the caches handed to it and
// returns a status, a condition, a decision or a wait (workqueue.Expected); it holds no
// client and queues nothing (internal/archtest TestSyncDecisionsActOnNothing). Among
// them, offlinedecider.go fills those caches with objects handed in, for the read-only
// commands.
//
// Words used throughout, in Kubernetes terms:
//   - a decision is the status this package computes for an object from the caches;
//   - a confirmation (confirmed object) is an object whose stored status the API server
//     holds exactly as decided: the object a successful UpdateStatus returned, or a
//     lister object whose status already equals the decision. Only confirmed objects
//     reach the Consul syncer;
//   - a verdict is what the data plane (Consul) said about the entries written for an
//     object: its Accepted condition on the entry, or why nothing could be written. It
//     becomes the Gateway's Programmed and the route's ConsulAccepted condition; a
//     route's binding (Consul's Bound condition on one listener of a parent) narrows
//     the verdict for that parent.
//
// It shares its name with the standard library's sync; alias one of them where a file
// needs both.
package sync
