package consul

import (
	"fmt"
	"testing"
)

// BenchmarkTranslate measures one full translation, which the syncer runs once per
// batch of confirmations, for snapshots of growing size: compare ns/op and allocs/op
// across sizes to see how the cost grows with the number of routes.
func BenchmarkTranslate(b *testing.B) {
	for _, routes := range []int{10, 100, 1000} {
		objs := []any{
			trGateway("apps", "gw", true, trValid(trHTTP("http", 80, ""))),
			trService("apps", "web", 8080),
		}
		for i := range routes {
			objs = append(objs, trWebRoute(fmt.Sprintf("r%d", i), []string{fmt.Sprintf("r%d.example.com", i)}, trAttach("apps", "gw", "http")))
		}
		snapshot := trSnapshot(objs...)
		ownership := Ownership{Controller: "example.com/c", ClusterID: "bench"}
		b.Run(fmt.Sprintf("routes=%d", routes), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if d := Translate(snapshot, Naming{}, ownership, Options{}); len(d.Entries) != routes+1 {
					b.Fatalf("%d entries, want %d", len(d.Entries), routes+1)
				}
			}
		})
	}
}
