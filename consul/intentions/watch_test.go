package intentions

import (
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	consulapi "github.com/hashicorp/consul/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// The keeper's watches list through consul.EntryLister, which decodes each entry
// straight into its type. Against a real Consul, every kind they list decodes as
// consul/api's own List decodes it (durations, sources with permissions, splits), and
// a second list after a change returns the unchanged entries as they were.
func TestEntryListerDecodesTheWatchedKindsAsConsulAPIDoes(t *testing.T) {
	_, admin := testenv.StartConsulFor(t, t.TempDir(), testenv.ConsulOptions{})
	entries := []consulapi.ConfigEntry{
		&consulapi.ServiceConfigEntry{Kind: consulapi.ServiceDefaults, Name: "web", Protocol: "http"},
		&consulapi.ServiceConfigEntry{Kind: consulapi.ServiceDefaults, Name: "web-v2", Protocol: "http"},
		&consulapi.ServiceResolverConfigEntry{Kind: consulapi.ServiceResolver, Name: "web", ConnectTimeout: 3 * time.Second,
			Subsets: map[string]consulapi.ServiceResolverSubset{"v1": {Filter: "Service.Meta.version == v1"}}},
		&consulapi.ServiceRouterConfigEntry{Kind: consulapi.ServiceRouter, Name: "web", Routes: []consulapi.ServiceRoute{{
			Match:       &consulapi.ServiceRouteMatch{HTTP: &consulapi.ServiceRouteHTTPMatch{PathPrefix: "/v2"}},
			Destination: &consulapi.ServiceRouteDestination{Service: "web-v2", RequestTimeout: 5 * time.Second, NumRetries: 2, RetryOnStatusCodes: []uint32{503}},
		}}},
		&consulapi.ServiceSplitterConfigEntry{Kind: consulapi.ServiceSplitter, Name: "web", Splits: []consulapi.ServiceSplit{
			{Weight: 90, ServiceSubset: "v1"}, {Weight: 10, Service: "web-v2"},
		}},
		&consulapi.ServiceIntentionsConfigEntry{Kind: consulapi.ServiceIntentions, Name: "web", Meta: map[string]string{"owner": "test"}, Sources: []*consulapi.SourceIntention{
			{Name: "gateway", Action: consulapi.IntentionActionAllow, Description: "ours"},
			{Name: "*", Permissions: []*consulapi.IntentionPermission{{Action: consulapi.IntentionActionDeny,
				HTTP: &consulapi.IntentionHTTPPermission{PathPrefix: "/admin", Methods: []string{"POST"}}}}},
		}},
	}
	for _, e := range entries {
		if _, _, err := admin.ConfigEntries().Set(e, nil); err != nil {
			t.Fatalf("write %s %s: %v", e.GetKind(), e.GetName(), err)
		}
	}
	for _, kind := range append([]string{consulapi.ServiceIntentions}, chainKinds...) {
		lister := consul.NewEntryLister(admin, kind)
		got, _, size, err := lister.List(&consulapi.QueryOptions{RequireConsistent: true})
		if err != nil {
			t.Fatalf("list %s: %v", kind, err)
		}
		want, _, err := admin.ConfigEntries().List(kind, &consulapi.QueryOptions{RequireConsistent: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 || size == 0 {
			t.Fatalf("%s: consul/api lists %d entries, the lister read %d bytes; want some", kind, len(want), size)
		}
		if diff := gocmp.Diff(want, got); diff != "" {
			t.Errorf("%s: the lister's entries differ from consul/api's (-want +got):\n%s", kind, diff)
		}
	}

	// Another intention: the second list decodes it and reuses the first's entry for web.
	lister := consul.NewEntryLister(admin, consulapi.ServiceIntentions)
	first, meta, _, err := lister.List(&consulapi.QueryOptions{RequireConsistent: true})
	if err != nil {
		t.Fatal(err)
	}
	other := &consulapi.ServiceIntentionsConfigEntry{Kind: consulapi.ServiceIntentions, Name: "web-v2",
		Sources: []*consulapi.SourceIntention{{Name: "gateway", Action: consulapi.IntentionActionAllow}}}
	if _, _, err := admin.ConfigEntries().Set(other, nil); err != nil {
		t.Fatal(err)
	}
	second, _, _, err := lister.List(&consulapi.QueryOptions{WaitIndex: meta.LastIndex, WaitTime: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 1 || len(second) != 2 {
		t.Fatalf("lists of %d then %d entries, want 1 then 2", len(first), len(second))
	}
	if second[0] != first[0] {
		t.Errorf("the unchanged entry %s was decoded again, not reused", first[0].GetName())
	}
	if got := second[1].(*consulapi.ServiceIntentionsConfigEntry); got.Name != "web-v2" || len(got.Sources) != 1 {
		t.Errorf("the new entry decoded as %+v", got)
	}
}
