package gatewayapi

import (
	"slices"
	"testing"
)

func TestKeyAllowlist(t *testing.T) {
	allow := KeyAllowlist{"example.com/*", "lb.example.net/scheme"}
	for key, want := range map[string]bool{
		"team":                           true, // no prefix: the user's
		"example.com/owner":              true,
		"sub.example.com/owner":          false, // another prefix
		"lb.example.net/scheme":          true,
		"lb.example.net/type":            false,
		"iam.gke.io/gcp-service-account": false,
		"eks.amazonaws.com/role-arn":     false,
	} {
		if got := allow.Allows(key); got != want {
			t.Errorf("Allows(%q) = %v, want %v", key, got, want)
		}
	}
	if !(KeyAllowlist{"*"}).Allows("eks.amazonaws.com/role-arn") {
		t.Error(`"*" does not allow every key`)
	}
	refused := KeyAllowlist(nil).RefusedInfrastructureKeys(
		map[string]string{"team": "a", "example.com/x": "1"},
		map[string]string{"example.com/x": "2", "iam.gke.io/gcp-service-account": "b", "note": "c"})
	if want := []string{"example.com/x", "iam.gke.io/gcp-service-account"}; !slices.Equal(refused, want) {
		t.Errorf("refused %q, want %q", refused, want)
	}
}

func TestKeyAllowlistValidate(t *testing.T) {
	if p := (KeyAllowlist{"*", "example.com/*", "example.com/key", "team"}).Validate(); len(p) > 0 {
		t.Errorf("valid patterns refused: %q", p)
	}
	if p := (KeyAllowlist{"", "example.*", "*/*", "a*b/c"}).Validate(); len(p) != 4 {
		t.Errorf("want 4 problems, got %q", p)
	}
}
