package sync

import (
	gosync "sync"
)

// ownWrites remembers, per object, the resourceVersion that our last successful status
// write replaced. While the cache still holds exactly that version, it has not yet
// seen our write: judging the object again from it would compare against a status the
// server no longer holds and write with a resourceVersion that can only get a 409. The
// informer's event for our write enqueues the key again, and the sync works on that.
//
// Versions are compared for equality only: "the cache holds the version we replaced"
// needs no order.
type ownWrites struct {
	mu       gosync.Mutex
	replaced map[objectKey]string
}

func newOwnWrites() *ownWrites {
	return &ownWrites{replaced: map[objectKey]string{}}
}

// wrote records that a status write replaced version replaced of key.
func (w *ownWrites) wrote(key objectKey, replaced string) {
	if replaced == "" {
		return // an object without a version (a test's fake): nothing to recognise
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.replaced[key] = replaced
}

// cacheBehind reports whether cached is the version our last write of key replaced,
// and forgets the write once the cache holds anything else.
func (w *ownWrites) cacheBehind(key objectKey, cached string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	replaced, ok := w.replaced[key]
	if !ok {
		return false
	}
	if replaced == cached {
		return true
	}
	delete(w.replaced, key)
	return false
}

// forget drops key, for an object that is gone.
func (w *ownWrites) forget(key objectKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.replaced, key)
}
