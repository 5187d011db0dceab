package consul

import (
	"testing"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

func TestHeldEntries(t *testing.T) {
	key := translate.EntryKey{Kind: consulapi.ServiceDefaults, Name: "web"}
	written := &consulapi.ServiceConfigEntry{Kind: consulapi.ServiceDefaults, Name: "web", Protocol: "http"}
	// What Consul answers for the same entry: indexes and defaults it fills in.
	stored := &consulapi.ServiceConfigEntry{Kind: consulapi.ServiceDefaults, Name: "web", Protocol: "http",
		Namespace: "default", ModifyIndex: 42, TransparentProxy: &consulapi.TransparentProxyConfig{}}
	edited := &consulapi.ServiceConfigEntry{Kind: consulapi.ServiceDefaults, Name: "web", Protocol: "tcp"}

	h := newHeldEntries()
	if h.held(key, written) {
		t.Fatal("an entry never recorded is held")
	}
	h.record(key, stored)
	if !h.held(key, written) {
		t.Error("the written entry is not held after Consul was seen holding it with its own fields")
	}
	if h.held(key, edited) {
		t.Error("other content is held")
	}
	if h.held(translate.EntryKey{Kind: consulapi.ServiceDefaults, Name: "api"}, written) {
		t.Error("another key is held")
	}
	h.forget(key)
	if h.held(key, written) {
		t.Error("a forgotten entry is held")
	}
}
