package informers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func serviceAt(name, version string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, ResourceVersion: version}}
}

// A cache has caught up with a list when it holds each listed object at its listed
// version, or delivered that version on the way to a newer one, and holds nothing
// the list lacks. Versions are only compared for equality.
func TestCaughtUp(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		cached    []*corev1.Service
		delivered []*corev1.Service
		want      map[string]string
		caughtUp  bool
	}{
		{name: "same versions", cached: []*corev1.Service{serviceAt("a", "5"), serviceAt("b", "7")},
			want: map[string]string{"apps/a": "5", "apps/b": "7"}, caughtUp: true},
		{name: "empty list, empty cache", want: map[string]string{}, caughtUp: true},
		{name: "an older version cached", cached: []*corev1.Service{serviceAt("a", "4")},
			want: map[string]string{"apps/a": "5"}},
		{name: "a listed object not cached yet", cached: []*corev1.Service{serviceAt("a", "5")},
			want: map[string]string{"apps/a": "5", "apps/b": "7"}},
		{name: "an object the list lacks is cached (deleted, or created after the list)",
			cached: []*corev1.Service{serviceAt("a", "5"), serviceAt("gone", "3")},
			want:   map[string]string{"apps/a": "5"}},
		{name: "the listed version was delivered, and a newer one after it",
			cached: []*corev1.Service{serviceAt("a", "9")}, delivered: []*corev1.Service{serviceAt("a", "5"), serviceAt("a", "9")},
			want: map[string]string{"apps/a": "5"}, caughtUp: true},
		{name: "another version than the listed one was delivered",
			cached: []*corev1.Service{serviceAt("a", "9")}, delivered: []*corev1.Service{serviceAt("a", "9")},
			want: map[string]string{"apps/a": "5"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := cache.NewStore(cache.MetaNamespaceKeyFunc)
			for _, svc := range tc.cached {
				if err := store.Add(svc); err != nil {
					t.Fatal(err)
				}
			}
			seen := newDeliveredVersions()
			h := seen.handler()
			for _, svc := range tc.delivered {
				h.OnUpdate(nil, svc)
			}
			if got := seen.caughtUp(tc.want, store); got != tc.caughtUp {
				t.Errorf("caughtUp = %v, want %v", got, tc.caughtUp)
			}
		})
	}
}
