// Package workqueue owns the typed, rate-limited queues (one per kind, named so their
// metrics are labelled) and the one worker loop and retry policy that drain them. A
// sync that decides a key must be looked at again returns it (Requeuing), and the loop
// queues it.
//
// It shares its name with k8s.io/client-go/util/workqueue; alias one of them where a
// file needs both.
package workqueue
