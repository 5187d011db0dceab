package consul

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
	gosync "sync"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// A Consul whose certificate the client does not trust stays untrusted for the life of
// the process: reading its verdicts gives up at once instead of retrying until
// verdictsTimeout, so statuses, and the failed writes' ConsulWriteFailed that name the
// certificate, are not held back. Other errors (Consul not up yet) are retried.
func TestReadVerdictsGivesUpOnAnUntrustedCertificate(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("[]"))
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.StartTLS()
	t.Cleanup(srv.Close)
	// No CA: the test server's certificate is signed by none the client trusts.
	untrusting, err := consulapi.NewClient(&consulapi.Config{Address: srv.Listener.Addr().String(), Scheme: "https"})
	if err != nil {
		t.Fatal(err)
	}
	s := NewSyncer(Config{Client: untrusting, Ownership: testOwnership})
	start := time.Now()
	s.readVerdicts(t.Context())
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("reading verdicts from a Consul whose certificate is not trusted took %s; want it to give up at once", took.Round(time.Millisecond))
	}
	if !s.HasSynced() {
		t.Error("HasSynced is false after reading verdicts gave up")
	}

	_, certErr := untrusting.Status().Leader()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	refusing, err := consulapi.NewClient(&consulapi.Config{Address: closed.Listener.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	_, refusedErr := refusing.Status().Leader()
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"an untrusted certificate", certErr, true},
		{"a connection refused", refusedErr, false},
	} {
		if got := isCertificateError(tc.err); got != tc.want {
			t.Errorf("isCertificateError(%s: %v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// A restarted Consul server restores its last snapshot and applies the rest of its log
// once it leads again; a read in the default mode can be answered in between, with
// entries at older states than were read before (docs/reliability.md measured their
// verdicts reaching status). The watch's first list, and the first after an error,
// is consistent, which waits for the whole log; an answer whose index went back is not
// acted on, and the kind is read again, consistently. So the older verdict in the
// second answer below never reaches the status pipeline.
func TestWatchTakesNoVerdictFromAnOlderState(t *testing.T) {
	judged := func(modifyIndex uint64, status consulapi.ConditionStatus, reason string) []byte {
		e := webRouteEntry()
		e.ModifyIndex = modifyIndex
		e.Status = consulapi.ConfigEntryStatus{Conditions: []consulapi.Condition{{Type: "Accepted", Status: status, Reason: reason}}}
		data, err := json.Marshal([]consulapi.ConfigEntry{e})
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	answers := []struct {
		wantIndex      string
		wantConsistent bool
		index          string
		body           []byte
	}{
		{"", true, "100", judged(90, consulapi.ConditionStatusTrue, "Accepted")},
		// A server replaying its log: the entry as it was at index 40.
		{"100", false, "60", judged(40, consulapi.ConditionStatusFalse, "InvalidDiscoveryChain")},
		{"", true, "120", judged(90, consulapi.ConditionStatusTrue, "Accepted")},
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var mu gosync.Mutex
	served := 0
	consul := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/config/"+consulapi.HTTPRoute {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		n := served
		served++
		mu.Unlock()
		if n >= len(answers) {
			cancel()
			<-r.Context().Done()
			return
		}
		a := answers[n]
		if got := r.URL.Query().Get("index"); got != a.wantIndex {
			t.Errorf("list %d asked from index %q, want %q", n+1, got, a.wantIndex)
		}
		if got := r.URL.Query().Has("consistent"); got != a.wantConsistent {
			t.Errorf("list %d from index %q: consistent is %t, want %t", n+1, a.wantIndex, got, a.wantConsistent)
		}
		w.Header().Set("X-Consul-Index", a.index)
		_, _ = w.Write(a.body)
	}))
	t.Cleanup(consul.Close)
	client, err := consulapi.NewClient(&consulapi.Config{Address: consul.Listener.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	s := NewSyncer(Config{Client: client, Ownership: testOwnership})
	route := cache.ObjectName{Namespace: "apps", Name: "web"}
	var seen []string
	s.statusChanged = func(kind gatewayv1.Kind, key cache.ObjectName) {
		if v := s.Verdict(kind, key); key == route {
			seen = append(seen, v.Reason)
		}
	}
	s.watchKind(ctx, consulapi.HTTPRoute)
	mu.Lock()
	defer mu.Unlock()
	if served <= len(answers) {
		t.Fatalf("the watch made %d lists, want more than %d", served, len(answers))
	}
	if slices.Contains(seen, "InvalidDiscoveryChain") {
		t.Errorf("the verdicts the watch reported were %q: it took one from the answer whose index went back", seen)
	}
	if v := s.Verdict("HTTPRoute", route); !v.Programmed {
		t.Errorf("the verdict after the watch is %+v, want Consul's Accepted", v)
	}
}

// The verdicts read before the status workers start are consistent too: a new leader
// must not start from the middle of a Consul's replay either.
func TestReadVerdictsReadsConsistently(t *testing.T) {
	var mu gosync.Mutex
	var lists []string
	consul := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		lists = append(lists, r.URL.Path)
		mu.Unlock()
		if !r.URL.Query().Has("consistent") {
			t.Errorf("%s read without consistent", r.URL.Path)
		}
		w.Header().Set("X-Consul-Index", "1")
		_, _ = w.Write([]byte("[]"))
	}))
	t.Cleanup(consul.Close)
	client, err := consulapi.NewClient(&consulapi.Config{Address: consul.Listener.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	NewSyncer(Config{Client: client, Ownership: testOwnership}).readVerdicts(t.Context())
	mu.Lock()
	defer mu.Unlock()
	if len(lists) != 3 {
		t.Errorf("readVerdicts listed %v, want the three kinds Consul judges", lists)
	}
}

// routeLog records what a RouteObserver is told, in order.
type routeLog struct {
	mu    gosync.Mutex
	calls []string
	// observed is called with the number of ObserveRoutes calls after each one.
	observed func(int)
}

func (l *routeLog) ObserveRoutes(kind string, _ []consulapi.ConfigEntry) {
	l.mu.Lock()
	l.calls = append(l.calls, "observe "+kind)
	n := 0
	for _, call := range l.calls {
		if call == "observe "+kind {
			n++
		}
	}
	l.mu.Unlock()
	l.observed(n)
}

func (l *routeLog) ForgetRoutes(kind string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, "forget "+kind)
}

// The intentions keeper acts on the routes the watch tells it of, in the Consul it
// writes to. When the watch fails or finds Consul's index gone back, Consul may have
// lost those routes (test/chaos, seed 202: intentions were put back in an emptied
// Consul for a route that no longer existed), so the observer is told to forget them
// before the watch lists the kind again.
func TestWatchTellsTheRouteObserverWhenItStartsAgain(t *testing.T) {
	answers := []struct {
		index  string // X-Consul-Index; "" answers an error
		status int
	}{
		{index: "50"},
		{status: http.StatusInternalServerError}, // Consul stopped
		{index: "50"},
		{index: "20"}, // Consul came back without its data
		{index: "20"},
	}
	var mu gosync.Mutex
	served := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/config/"+consulapi.HTTPRoute {
			http.NotFound(w, r) // the version check: not known, which the watch tolerates
			return
		}
		mu.Lock()
		answer := answers[min(served, len(answers)-1)]
		served++
		mu.Unlock()
		if answer.status != 0 {
			http.Error(w, "No cluster leader", answer.status)
			return
		}
		w.Header().Set("X-Consul-Index", answer.index)
		_, _ = w.Write([]byte("[]"))
	}))
	t.Cleanup(srv.Close)
	client, err := consulapi.NewClient(&consulapi.Config{Address: srv.Listener.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	observer := &routeLog{observed: func(n int) {
		if n == 3 { // each answer of the script was taken in
			cancel()
		}
	}}
	s := NewSyncer(Config{Client: client, Ownership: testOwnership, Routes: observer})
	s.watchKind(ctx, consulapi.HTTPRoute)

	observe, forget := "observe "+consulapi.HTTPRoute, "forget "+consulapi.HTTPRoute
	want := []string{observe, forget, observe, forget, observe}
	observer.mu.Lock()
	defer observer.mu.Unlock()
	if !slices.Equal(observer.calls, want) {
		t.Errorf("the route observer was told %q; want %q", observer.calls, want)
	}
}

// A list the watch sent before the writer created an entry may be answered without it.
// Taking that answer's word, a cold start of 1,000 routes at QPS 20/30 with
// --manage-service-defaults created 72 entries a second time: check-and-set refused
// those Consul had judged meanwhile, and Consul answered true without writing for
// those it had not (it skips an upsert equal to what it holds), which the writer
// logged as a drift put back. The entry is created once. A list sent after the create
// that still lacks it means the entry was removed outside the controller: it is put
// back.
func TestWatchAnswerOlderThanACreateCreatesNothingAgain(t *testing.T) {
	entry := webRouteEntry()
	stored, err := json.Marshal(entry)
	if err != nil {
		t.Fatal(err)
	}
	var creates int
	s, key := syncerAgainst(t, entry, func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPut:
			creates++
			_, _ = w.Write([]byte("true")) // Consul 1.15's answer to an equal upsert too
		case http.MethodGet:
			_, _ = w.Write(stored)
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
		}
	})
	ctx := t.Context()
	// The watch's first answer: Consul holds no route.
	s.ledger.list(consulapi.HTTPRoute, s.ledger.listSent(), nil, nil)
	stale := s.ledger.listSent() // the watch sends its next list
	if err := s.syncEntry(ctx, key); err != nil || creates != 1 {
		t.Fatalf("first sync: %v, %d creates; want the entry created", err, creates)
	}
	// Consul answers that list with what it held before the create.
	s.ledger.list(consulapi.HTTPRoute, stale, nil, nil)
	s.compareKind(ctx, consulapi.HTTPRoute, nil)
	if n := s.queue.Len(); n != 0 {
		t.Errorf("an answer older than the create queued %d keys; want none", n)
	}
	if st := s.entryState(key); st.knownAbsent {
		t.Error("an answer older than the create made the entry known absent")
	}
	if err := s.syncEntry(ctx, key); err != nil {
		t.Fatal(err)
	}
	if creates != 1 {
		t.Errorf("the entry was created %d times after an answer older than its create; want once", creates)
	}

	// A list sent after the create that lacks the entry: it was removed outside.
	s.ledger.list(consulapi.HTTPRoute, s.ledger.listSent(), nil, nil)
	s.compareKind(ctx, consulapi.HTTPRoute, nil)
	if n := s.queue.Len(); n != 1 {
		t.Errorf("an entry missing from a list sent after its create queued %d keys; want it queued", n)
	}
	if err := s.syncEntry(ctx, key); err != nil {
		t.Fatal(err)
	}
	if creates != 2 {
		t.Errorf("an entry removed outside the controller was created %d times in all; want it put back (2)", creates)
	}
}
