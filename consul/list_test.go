package consul

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"
)

// TestDecodeEntry: entries decoded straight into their type equal what consul/api's
// own decoding gives, and an entry that does not fit its type decodes through consul/api.
func TestDecodeEntry(t *testing.T) {
	tests := []struct{ name, kind, json string }{
		{"http-route with status", consulapi.HTTPRoute, `{"Kind":"http-route","Name":"web","Parents":[{"Kind":"api-gateway","Name":"gw","SectionName":"http"}],
			"Rules":[{"Matches":[{"Path":{"Match":"prefix","Value":"/a"}}],"Services":[{"Name":"echo","Weight":1}]}],"Hostnames":["a.example.com"],
			"Meta":{"k":"v"},"Status":{"Conditions":[{"Type":"Accepted","Status":"True","Reason":"Accepted","Message":"ok","LastTransitionTime":"2026-12-01T00:00:00Z"}]},
			"CreateIndex":5,"ModifyIndex":9}`},
		{"api-gateway with TLS", consulapi.APIGateway, `{"Kind":"api-gateway","Name":"gw","Listeners":[{"Name":"https","Port":443,"Protocol":"http",
			"TLS":{"Certificates":[{"Kind":"inline-certificate","Name":"c"}]}}],"ModifyIndex":3}`},
		{"service-defaults", consulapi.ServiceDefaults, `{"Kind":"service-defaults","Name":"echo","Protocol":"http","ModifyIndex":4}`},
		// A newer Consul's timeout filter: a duration as a string, which only consul/api's
		// decoding converts.
		{"a field that needs conversion", consulapi.HTTPRoute, `{"Kind":"http-route","Name":"slow","Rules":[{"Filters":{"TimeoutFilter":{"RequestTimeout":"10s"}}}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeEntry(tt.kind, []byte(tt.json))
			if err != nil {
				t.Fatal(err)
			}
			want, err := consulapi.DecodeConfigEntryFromJSON([]byte(tt.json))
			if err != nil {
				t.Fatal(err)
			}
			if diff := gocmp.Diff(want, got); diff != "" {
				t.Errorf("decoded entry differs from consul/api's (-want +got):\n%s", diff)
			}
		})
	}
	got, err := decodeEntry(consulapi.HTTPRoute, []byte(tests[3].json))
	if err != nil {
		t.Fatal(err)
	}
	if d := got.(*consulapi.HTTPRouteConfigEntry).Rules[0].Filters.TimeoutFilter.RequestTimeout; d != 10*time.Second {
		t.Errorf("RequestTimeout = %v, want 10s", d)
	}
}

// TestEntryList: a list decodes element by element into typed entries; null is no
// entries; anything but an array is an error naming the kind.
func TestEntryList(t *testing.T) {
	list := entryList{kind: consulapi.HTTPRoute}
	if err := json.Unmarshal([]byte(`[{"Kind":"http-route","Name":"a"},{"Kind":"http-route","Name":"b","ModifyIndex":7}]`), &list); err != nil {
		t.Fatal(err)
	}
	want := []consulapi.ConfigEntry{
		&consulapi.HTTPRouteConfigEntry{Kind: consulapi.HTTPRoute, Name: "a"},
		&consulapi.HTTPRouteConfigEntry{Kind: consulapi.HTTPRoute, Name: "b", ModifyIndex: 7},
	}
	if diff := gocmp.Diff(want, list.entries); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	empty := entryList{kind: consulapi.HTTPRoute}
	if err := json.Unmarshal([]byte(`null`), &empty); err != nil || len(empty.entries) != 0 {
		t.Errorf("null: %v, %d entries", err, len(empty.entries))
	}
	bad := entryList{kind: consulapi.APIGateway}
	if err := json.Unmarshal([]byte(`{"Kind":"api-gateway"}`), &bad); err == nil || !strings.Contains(err.Error(), consulapi.APIGateway) {
		t.Errorf("an object for a list: err = %v, want one naming %s", err, consulapi.APIGateway)
	}
}

// TestEntryListReusesKnownEntries: a list decoded after another reuses the entries of
// elements whose bytes did not change, decodes the changed ones, and forgets the gone.
func TestEntryListReusesKnownEntries(t *testing.T) {
	known := newKnownEntries()
	first := entryList{kind: consulapi.HTTPRoute, known: known}
	if err := json.Unmarshal([]byte(`[{"Kind":"http-route","Name":"a","ModifyIndex":1},{"Kind":"http-route","Name":"b","ModifyIndex":2}]`), &first); err != nil {
		t.Fatal(err)
	}
	second := entryList{kind: consulapi.HTTPRoute, known: known}
	if err := json.Unmarshal([]byte(`[{"Kind":"http-route","Name":"a","ModifyIndex":1},{"Kind":"http-route","Name":"b","ModifyIndex":3}]`), &second); err != nil {
		t.Fatal(err)
	}
	if second.entries[0] != first.entries[0] {
		t.Error("an unchanged element was decoded again")
	}
	if second.entries[1] == first.entries[1] || second.entries[1].GetModifyIndex() != 3 {
		t.Errorf("a changed element: got %+v, want a new entry at ModifyIndex 3", second.entries[1])
	}
	if len(known.byBytes) != 2 {
		t.Errorf("known entries after the second list: %d, want 2 (the first list's b forgotten)", len(known.byBytes))
	}
	known.forget()
	third := entryList{kind: consulapi.HTTPRoute, known: known}
	if err := json.Unmarshal([]byte(`[{"Kind":"http-route","Name":"a","ModifyIndex":1}]`), &third); err != nil {
		t.Fatal(err)
	}
	if third.entries[0] == first.entries[0] {
		t.Error("after forget, an element was not decoded again")
	}
}

// BenchmarkEntryList decodes a list of 5,000 http-routes after a list that differs in
// one element, with and without the previous list's entries: the watch's cost of an
// edit, from the bytes encoding/json has already checked (as in a Consul answer).
func BenchmarkEntryList(b *testing.B) {
	before, after := routeListAnswer(-1), routeListAnswer(5000/2)
	for _, reuse := range []bool{false, true} {
		b.Run(fmt.Sprintf("known=%t", reuse), func(b *testing.B) {
			var known *knownEntries
			if reuse {
				known = newKnownEntries()
				if err := json.Unmarshal(before, &entryList{kind: consulapi.HTTPRoute, known: known}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				data := before
				if i%2 == 0 {
					data = after
				}
				list := entryList{kind: consulapi.HTTPRoute, known: known}
				if err := list.UnmarshalJSON(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestStreamArrayElements: elements end at commas and brackets outside strings and
// nested values only, escaped quotes included, whatever the whitespace and however the
// answer arrives (here a byte per read); null is no elements; a truncated or foreign
// answer is an error.
func TestStreamArrayElements(t *testing.T) {
	data := " [ {\"a\":\"x],\\\"{ \"} ,\n[1,[2]], \"s\\\\\" ,3,{ \"b\" : {\"c\":[]}}\t] "
	var got []string
	n, err := streamArrayElements(iotest.OneByteReader(strings.NewReader(data)), func(raw []byte) error {
		got = append(got, string(raw))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`{"a":"x],\"{ "}`, `[1,[2]]`, `"s\\"`, `3`, `{"b":{"c":[]}}`}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("elements (-want +got):\n%s", diff)
	}
	if n != len(strings.TrimRight(data, " ")) {
		t.Errorf("read %d bytes, want %d (up to the closing bracket)", n, len(strings.TrimRight(data, " ")))
	}
	for _, empty := range []string{"[]", "[ \n ]", "null", " null"} {
		count := 0
		if _, err := streamArrayElements(strings.NewReader(empty), func([]byte) error { count++; return nil }); err != nil || count != 0 {
			t.Errorf("%q: %d elements, %v; want 0, no error", empty, count, err)
		}
	}
	for _, bad := range []string{"", "{}", "nul", `[{"a":1}`, `[{"a":1},`, `[1,,2]`} {
		if _, err := streamArrayElements(strings.NewReader(bad), func([]byte) error { return nil }); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestWatchPause: the pause is ten times the watch's own work or a second per
// watchPaceBytes of answer, whichever is longer, within watchMinPause and 5 s.
func TestWatchPause(t *testing.T) {
	tests := []struct {
		busy time.Duration
		size int
		want time.Duration
	}{
		{time.Millisecond, 0, watchMinPause},
		{20 * time.Millisecond, 1 << 10, watchMinPause},
		{150 * time.Millisecond, 1 << 10, 1500 * time.Millisecond},
		{time.Millisecond, 2 * watchPaceBytes, 2 * time.Second},
		{time.Millisecond, 3 * watchPaceBytes / 2, 1500 * time.Millisecond},
		{200 * time.Millisecond, watchPaceBytes, 2 * time.Second},
		{time.Second, watchPaceBytes, 5 * time.Second},
		{time.Millisecond, 100 * watchPaceBytes, 5 * time.Second},
	}
	for _, tt := range tests {
		if got := WatchPause(tt.busy, tt.size); got != tt.want {
			t.Errorf("WatchPause(%v, %d) = %v, want %v", tt.busy, tt.size, got, tt.want)
		}
	}
}

// routeListAnswer is Consul's answer to a list of 5,000 http-routes; the route
// changed, if any, has another ModifyIndex.
func routeListAnswer(changed int) []byte {
	const n = 5000
	var sb strings.Builder
	sb.WriteString("[")
	for i := range n {
		if i > 0 {
			sb.WriteString(",")
		}
		index := 10
		if i == changed {
			index = 11
		}
		fmt.Fprintf(&sb, `{"Kind":"http-route","Name":"route-%d","Parents":[{"Kind":"api-gateway","Name":"gw","SectionName":"http"}],`+
			`"Rules":[{"Matches":[{"Path":{"Match":"prefix","Value":"/r%d"}}],"Services":[{"Name":"echo-%d","Weight":1}]}],"Hostnames":["r%d.example.com"],`+
			`"Meta":{"managed-by":"consul-gateway-controller"},"Status":{"Conditions":[{"Type":"Accepted","Status":"True","Reason":"Accepted","Message":"ok","LastTransitionTime":"2026-12-01T00:00:00Z"}]},`+
			`"CreateIndex":5,"ModifyIndex":%d}`, i, i, i, i, index)
	}
	sb.WriteString("]")
	return []byte(sb.String())
}

// BenchmarkListAnswer reads a list of 5,000 http-routes from the answer's body, as
// consul/api reads it (a json.Decoder holds the whole answer, then the list decodes
// it) and as the streaming transport reads it (element by element). B/op is the
// memory each way costs per answer, the decoded entries included.
func BenchmarkListAnswer(b *testing.B) {
	answer := routeListAnswer(-1)
	b.Run("consul-api", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			list := entryList{kind: consulapi.HTTPRoute}
			if err := json.NewDecoder(bytes.NewReader(answer)).Decode(&list); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("streamed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			list := entryList{kind: consulapi.HTTPRoute}
			if err := list.readStream(bytes.NewReader(answer)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
