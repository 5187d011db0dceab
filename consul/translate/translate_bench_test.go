package translate

import (
	"fmt"
	"testing"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// benchSnapshot is one Gateway per 20 routes, each route on its Gateway's listener.
func benchSnapshot(routes int) Snapshot {
	var objs []any
	for g := range max(routes/20, 1) {
		objs = append(objs, confirmedGateway("apps", fmt.Sprintf("gw%d", g), true, validListener(httpListener("http", 80, ""))))
	}
	for i := range routes {
		objs = append(objs, webRoute(fmt.Sprintf("r%d", i), []string{fmt.Sprintf("r%d.example.com", i)}, attachment("apps", fmt.Sprintf("gw%d", i/20), "http")))
	}
	return snapshotOf(objs...)
}

// BenchmarkTranslate measures one full translation for snapshots of growing size:
// what every batch of confirmations cost before translations were kept.
func BenchmarkTranslate(b *testing.B) {
	for _, routes := range []int{100, 1000, 5000} {
		snapshot := benchSnapshot(routes)
		ownership := Ownership{Controller: "example.com/c", ClusterID: "bench"}
		b.Run(fmt.Sprintf("routes=%d", routes), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if d := Translate(snapshot, Naming{}, ownership, Options{}); len(d.Entries) != routes+max(routes/20, 1) {
					b.Fatalf("%d entries", len(d.Entries))
				}
			}
		})
	}
}

// BenchmarkTranslatorOneChange measures what the syncer pays per change: a Translator
// that has translated the snapshot once, updated with one route replaced by a new
// version. Compare with BenchmarkTranslate at the same size: the cost should not grow
// with the number of routes.
func BenchmarkTranslatorOneChange(b *testing.B) {
	for _, routes := range []int{100, 1000, 5000} {
		snapshot := benchSnapshot(routes)
		tr := NewTranslator(Naming{}, Ownership{Controller: "example.com/c", ClusterID: "bench"}, Options{})
		tr.Translate(snapshot)
		httpRoutes := snapshot.Routes["HTTPRoute"]
		key := sortedKeys(httpRoutes)[routes/2]
		b.Run(fmt.Sprintf("routes=%d", routes), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c := httpRoutes[key]
				c.Route = c.Route.DeepCopyObject().(gatewayapi.Object)
				httpRoutes[key] = c
				changes := Changes(NewSnapshot())
				changes.Routes["HTTPRoute"][key] = c
				tr.Update(changes)
				if tr.translated != 1 {
					b.Fatalf("%d objects translated, want 1", tr.translated)
				}
			}
		})
	}
}
