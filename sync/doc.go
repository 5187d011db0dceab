// Package sync owns the Gateway API decisions: pure functions that compute each object's
// status from cached data (listener validation, route binding, hostname intersection,
// ReferenceGrant checks, conditions), and the workers that write that status with the
// lister's resourceVersion and publish what the API server confirmed.
//
// It shares its name with the standard library's sync; alias one of them where a file
// needs both.
package sync
