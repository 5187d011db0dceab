package consul

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	gosync "sync"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

// fakeConsul answers reads of one entry and records the writes.
type fakeConsul struct {
	mu     gosync.Mutex
	entry  consulapi.ConfigEntry
	writes []string // the query and body of each PUT
}

func (f *fakeConsul) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Method == http.MethodPut {
		body, _ := io.ReadAll(r.Body)
		f.writes = append(f.writes, r.URL.RawQuery+" "+string(body))
		_, _ = w.Write([]byte("true"))
		return
	}
	_ = json.NewEncoder(w).Encode(f.entry)
}

func TestUnjudgedEntryIsWrittenAgain(t *testing.T) {
	own := translate.Ownership{Controller: "example.com/c", ClusterID: "test"}
	desired := &consulapi.HTTPRouteConfigEntry{Kind: consulapi.HTTPRoute, Name: "web.apps",
		Meta: own.Meta(translate.Owner{Kind: "HTTPRoute", Namespace: "apps", Name: "web", UID: "uid"})}
	unjudged := *desired
	unjudged.ModifyIndex = 42
	judged := unjudged
	judged.Status = consulapi.ConfigEntryStatus{Conditions: []consulapi.Condition{{Type: "Accepted", Status: consulapi.ConditionStatusTrue}}}

	tests := []struct {
		name       string
		held       consulapi.ConfigEntry
		writtenAgo time.Duration
		rejudges   int
		// lastJudgedAgo is when Consul last judged another entry (0: never).
		lastJudgedAgo time.Duration
		want          int // writes
	}{
		{"unjudged past the timeout: written again", &unjudged, judgeTimeout + time.Second, 0, 0, 1},
		{"unjudged within the timeout: wait", &unjudged, judgeTimeout / 2, 0, 0, 0},
		{"unjudged after the last attempt: left", &unjudged, judgeTimeout + time.Second, maxRejudges, 0, 0},
		{"judged: nothing to do", &judged, judgeTimeout + time.Second, 0, 0, 0},
		// A backlog: Consul is still judging entries, in no set order; others written
		// after this one may already be judged.
		{"Consul still judging: wait", &unjudged, 3 * judgeTimeout, 0, time.Second, 0},
		{"Consul idle since: passed over", &unjudged, 3 * judgeTimeout, 0, judgeTimeout + time.Second, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &fakeConsul{entry: tt.held}
			srv := httptest.NewServer(fake)
			defer srv.Close()
			client, err := consulapi.NewClient(&consulapi.Config{Address: srv.Listener.Addr().String()})
			if err != nil {
				t.Fatal(err)
			}
			now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
			s := NewSyncer(Config{Client: client, Ownership: own, Clock: clocktesting.NewFakePassiveClock(now)})
			defer s.queue.ShutDown()
			key := translate.KeyOf(desired)
			s.ledger.desire(map[translate.EntryKey]consulapi.ConfigEntry{key: desired})
			s.ledger.line(key).judgement = &judgement{writtenAt: now.Add(-tt.writtenAgo), rejudges: tt.rejudges}
			if tt.lastJudgedAgo > 0 {
				s.ledger.judged = judgingProgress{at: now.Add(-tt.lastJudgedAgo)}
			}

			if err := s.syncEntry(t.Context(), key); err != nil {
				t.Fatal(err)
			}
			if len(fake.writes) != tt.want {
				t.Fatalf("%d writes, want %d: %q", len(fake.writes), tt.want, fake.writes)
			}
			if tt.want == 0 {
				return
			}
			var written consulapi.HTTPRouteConfigEntry
			query, body, _ := strings.Cut(fake.writes[0], " ")
			if err := json.Unmarshal([]byte(body), &written); err != nil {
				t.Fatal(err)
			}
			if query != "cas=42" || written.Meta[metaRejudge] != "1" || !own.Owns(written.Meta) {
				t.Errorf("wrote %q with meta %v; want cas=42, %s=1 and our ownership", query, written.Meta, metaRejudge)
			}
			if !sameEntry(desired, &written) {
				t.Error("the entry written again differs from the desired one beyond its rejudge meta")
			}
		})
	}
}
