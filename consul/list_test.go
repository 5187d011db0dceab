package consul

import (
	"encoding/json"
	"strings"
	"testing"
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
