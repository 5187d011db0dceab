package consul

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
)

// A Consul that cannot be listed does not hold the status workers back (as with an
// untrusted certificate): they start with every service counted as registered, and
// once a list comes, every route is judged again ("").
func TestServiceNamesGiveUpOnFailure(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			http.Error(w, "no", http.StatusInternalServerError)
			return
		}
		w.Header().Set("X-Consul-Index", "7")
		if r.URL.Query().Get("filter") == outsideKubernetesFilter {
			_, _ = w.Write([]byte(`{"vm":[]}`))
			return
		}
		_, _ = w.Write([]byte(`{"web":[],"vm":[]}`))
	}))
	defer server.Close()
	client, err := consulapi.NewClient(&consulapi.Config{Address: server.URL})
	if err != nil {
		t.Fatal(err)
	}
	names := NewServiceNames(client, "")
	changed := make(chan string, 10)
	names.OnChange(func(name string) { changed <- name })
	go names.Run(t.Context())

	deadline := time.Now().Add(5 * time.Second)
	for !names.HasSynced() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !names.HasSynced() {
		t.Fatal("not synced after a failed list: the status workers would wait")
	}
	if !names.Known("api") {
		t.Error("a service counted as missing before any list")
	}
	if names.RegisteredOutsideKubernetes("vm") {
		t.Error("a service counted as registered outside Kubernetes before any list")
	}
	failing.Store(false)
	var got []string
	for len(got) < 2 {
		select {
		case name := <-changed:
			got = append(got, name)
		case <-time.After(10 * time.Second):
			t.Fatalf("changes reported once the lists came: %q, want \"\" and vm", got)
		}
	}
	// The first list of all names judges everything again; the first of the names
	// outside Kubernetes names each, as none counted before.
	if slices.Sort(got); !slices.Equal(got, []string{"", "vm"}) {
		t.Errorf("changes %q, want \"\" (judge everything again) and vm", got)
	}
	if names.Known("api") || !names.Known("web") {
		t.Errorf("after the list: api known %v, web known %v; want false, true", names.Known("api"), names.Known("web"))
	}
	if !names.RegisteredOutsideKubernetes("vm") || names.RegisteredOutsideKubernetes("web") {
		t.Errorf("after the list: vm outside %v, web outside %v; want true, false", names.RegisteredOutsideKubernetes("vm"), names.RegisteredOutsideKubernetes("web"))
	}
}
