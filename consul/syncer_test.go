package consul

import (
	"testing"

	"k8s.io/client-go/tools/cache"
	kworkqueue "k8s.io/client-go/util/workqueue"
)

// checkingQueue runs check on every key as it is queued.
type checkingQueue struct {
	kworkqueue.TypedRateLimitingInterface[EntryKey]
	check func(EntryKey)
}

func (q checkingQueue) Add(key EntryKey) {
	q.check(key)
	q.TypedRateLimitingInterface.Add(key)
}

// A worker may take a key the moment it is queued, so the desired state it reads then
// must already be the new one; otherwise it finds nothing to do and the change waits.
func TestTranslateQueuesKeysOnlyOnceTheirDesiredStateIsInPlace(t *testing.T) {
	s := NewSyncer(Config{
		Ownership: Ownership{Controller: "example.com/c", ClusterID: "test"},
	})
	gw := trGateway("infra", "gw", true, trValid(trHTTP("http", 80, "")))
	queued := 0
	s.queue = checkingQueue{TypedRateLimitingInterface: s.queue, check: func(key EntryKey) {
		queued++
		if _, ok := s.desiredEntry(key); !ok {
			t.Errorf("%v queued before its desired entry was in place", key)
		}
	}}
	s.snapshot.Gateways[cache.MetaObjectToName(gw)] = gw
	s.translate(t.Context())
	if queued == 0 {
		t.Fatal("translating a new Gateway queued nothing")
	}
}
