package consul

import (
	"encoding/json"
	"hash/fnv"
	gosync "sync"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

// heldEntries remembers, per owned entry, a fingerprint of the content Consul was last
// seen holding or was last given by the syncer. Writing that same content again means
// something else changed or removed it: a drift correction, not a spec change.
type heldEntries struct {
	mu      gosync.Mutex
	content map[translate.EntryKey]uint64
}

func newHeldEntries() *heldEntries {
	return &heldEntries{content: map[translate.EntryKey]uint64{}}
}

// record notes that Consul holds entry under key.
func (h *heldEntries) record(key translate.EntryKey, entry consulapi.ConfigEntry) {
	fp, ok := fingerprint(entry)
	h.mu.Lock()
	defer h.mu.Unlock()
	if !ok {
		delete(h.content, key)
		return
	}
	h.content[key] = fp
}

// forget drops key, after its entry was deleted.
func (h *heldEntries) forget(key translate.EntryKey) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.content, key)
}

// held reports whether Consul was last known to hold exactly entry under key.
func (h *heldEntries) held(key translate.EntryKey, entry consulapi.ConfigEntry) bool {
	fp, ok := fingerprint(entry)
	if !ok {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	prev, known := h.content[key]
	return known && prev == fp
}

// fingerprint hashes an entry's comparable form: equal for entries sameEntry calls
// equal. encoding/json writes map keys sorted, so the bytes are stable.
func fingerprint(entry consulapi.ConfigEntry) (uint64, bool) {
	form, err := comparableForm(entry)
	if err != nil {
		return 0, false
	}
	raw, err := json.Marshal(form)
	if err != nil {
		return 0, false
	}
	h := fnv.New64a()
	_, _ = h.Write(raw)
	return h.Sum64(), true
}
