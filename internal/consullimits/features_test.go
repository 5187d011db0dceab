package consullimits

import (
	"testing"

	"sigs.k8s.io/gateway-api/pkg/features"
)

// Every feature named is one the Gateway API defines, and none is both claimable and
// not claimed.
func TestFeaturesAreKnownAndDisjoint(t *testing.T) {
	seen := map[features.FeatureName]bool{}
	for _, f := range Features {
		if features.GetFeature(f.Name).Name != f.Name {
			t.Errorf("%s is not a Gateway API feature", f.Name)
		}
		if seen[f.Name] {
			t.Errorf("%s is listed twice", f.Name)
		}
		seen[f.Name] = true
		if why, ok := NotClaimed[f.Name]; ok {
			t.Errorf("%s is claimable and not claimed (%s)", f.Name, why)
		}
	}
	for name := range NotClaimed {
		if features.GetFeature(name).Name != name {
			t.Errorf("%s is not a Gateway API feature", name)
		}
	}
}
