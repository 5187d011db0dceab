package sync

import (
	gosync "sync"

	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

type objectKey struct {
	kind gatewayv1.Kind
	key  cache.ObjectName
}

// initialSync tracks the objects present at start until each has been synced once,
// successfully or not. The Consul syncer waits for it: before that, a missing
// confirmation may only mean "not judged yet". An object whose sync keeps failing does
// not hold everything else back; the syncer keeps its entries as they are instead (see
// consul.Config.OwnerExists).
type initialSync struct {
	mu      gosync.Mutex
	pending map[objectKey]bool
	started bool
	done    chan struct{}
}

func newInitialSync() *initialSync {
	return &initialSync{pending: map[objectKey]bool{}, done: make(chan struct{})}
}

// expect records the objects to wait for; with none, it is done at once.
func (s *initialSync) expect(keys []objectKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		s.pending[k] = true
	}
	s.started = true
	s.closeIfDone()
}

// track marks key attempted and passes err on.
func (s *initialSync) track(kind gatewayv1.Kind, key cache.ObjectName, err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending, objectKey{kind, key})
	s.closeIfDone()
	return err
}

func (s *initialSync) remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// closeIfDone closes done once, when expect ran and nothing is pending. Callers hold mu.
func (s *initialSync) closeIfDone() {
	if !s.started || len(s.pending) > 0 {
		return
	}
	select {
	case <-s.done:
	default:
		close(s.done)
	}
}
