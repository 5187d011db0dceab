package consul

import (
	"maps"
	gosync "sync"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

// consulView is which entries exist in Consul as far as the syncer knows without
// asking: those the drift watch last listed, and those the syncer wrote since. It
// saves the writer a read before each create and before each dependency check. Every
// write it leads to is a check-and-set, so a view that is out of date costs a failed
// write and a read, never a wrong entry.
type consulView struct {
	mu gosync.Mutex
	// listed are the kinds listed since Consul's data was last possibly replaced; for
	// other kinds nothing is known to be absent.
	listed  map[string]bool
	present map[translate.EntryKey]bool
}

func newConsulView() *consulView {
	return &consulView{listed: map[string]bool{}, present: map[translate.EntryKey]bool{}}
}

// list records that the entries of kind are exactly keys.
func (v *consulView) list(kind string, keys []translate.EntryKey) {
	v.mu.Lock()
	defer v.mu.Unlock()
	deleteKind(v.present, kind)
	for _, key := range keys {
		v.present[key] = true
	}
	v.listed[kind] = true
}

// forgetKind drops what is known of kind, when Consul's data may have been replaced.
func (v *consulView) forgetKind(kind string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	deleteKind(v.present, kind)
	delete(v.listed, kind)
}

// wrote records that key exists, and deleted that it does not.
func (v *consulView) wrote(key translate.EntryKey) { v.set(key, true) }

func (v *consulView) deleted(key translate.EntryKey) { v.set(key, false) }

func (v *consulView) set(key translate.EntryKey, present bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if present {
		v.present[key] = true
		return
	}
	delete(v.present, key)
}

// exists reports whether key is known to exist.
func (v *consulView) exists(key translate.EntryKey) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.present[key]
}

// absent reports whether key is known not to exist.
func (v *consulView) absent(key translate.EntryKey) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.listed[key.Kind] && !v.present[key]
}

// deleteKind removes every key of kind from m.
func deleteKind[V any](m map[translate.EntryKey]V, kind string) {
	maps.DeleteFunc(m, func(key translate.EntryKey, _ V) bool { return key.Kind == kind })
}
