package translate

import (
	"maps"
	"regexp"
	"strings"
	"testing"
)

// Consul's rules for meta (agent/structs in Consul 1.15): keys match consulMetaKeyFormat, are
// at most 128 characters and must not start with "consul-" (reserved); values are at
// most 512 characters; at most 64 pairs. Config entries are checked for the lengths
// and the count only, services for all of it; the controller keeps to all of it.
var consulMetaKeyFormat = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

const (
	consulMetaKeyMaxLength   = 128
	consulMetaValueMaxLength = 512
	consulMetaMaxPairs       = 64
)

func TestOwnershipMetaRoundTrip(t *testing.T) {
	o := Ownership{Controller: "example.com/gateway-controller", ClusterID: "east"}
	owner := Owner{Kind: "HTTPRoute", Namespace: "team-a", Name: "web.v1", UID: "0b6f5a1e-4c0d-4a8e-9a47-3f1c2d7e9b10"}
	meta := o.Meta(owner)
	if !o.Owns(meta) {
		t.Errorf("Owns(Meta(owner)) = false for meta %v", meta)
	}
	if got := OwnerOf(meta); got != owner {
		t.Errorf("OwnerOf(Meta(owner)) = %+v, want %+v", got, owner)
	}
	// Meta returns a fresh map: a caller may add to it.
	meta["extra"] = "x"
	if _, leaked := o.Meta(owner)["extra"]; leaked {
		t.Error("Meta returned a shared map")
	}
}

func TestOwns(t *testing.T) {
	o := Ownership{Controller: "example.com/gateway-controller", ClusterID: "east"}
	mine := o.Meta(Owner{Kind: "Gateway", Namespace: "default", Name: "gw", UID: "u1"})
	with := func(changes map[string]string, drop ...string) map[string]string {
		m := maps.Clone(mine)
		maps.Copy(m, changes)
		for _, k := range drop {
			delete(m, k)
		}
		return m
	}
	tests := []struct {
		name string
		meta map[string]string
		want bool
	}{
		{"own entry", mine, true},
		{"own entry for another object", with(map[string]string{metaKind: "TCPRoute", metaName: "other", metaUID: "u2"}), true},
		{"own entry with extra meta", with(map[string]string{"team": "a"}), true},
		{"another controller", with(map[string]string{metaController: "example.com/other"}), false},
		{"another cluster", with(map[string]string{metaCluster: "west"}), false},
		{"another controller and cluster", with(map[string]string{metaController: "example.com/other", metaCluster: "west"}), false},
		{"controller name differs in case", with(map[string]string{metaController: "Example.com/gateway-controller"}), false},
		{"no cluster key", with(nil, metaCluster), false},
		{"no controller key", with(nil, metaController), false},
		{"empty cluster id", with(map[string]string{metaCluster: ""}), false},
		{"nil meta", nil, false},
		{"empty meta", map[string]string{}, false},
		{"someone else's meta", map[string]string{"owner": "terraform"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := o.Owns(tt.meta); got != tt.want {
				t.Errorf("Owns(%v) = %v, want %v", tt.meta, got, tt.want)
			}
		})
	}
}

func TestOwnerOfForeignMeta(t *testing.T) {
	if got := OwnerOf(nil); got != (Owner{}) {
		t.Errorf("OwnerOf(nil) = %+v, want the zero Owner", got)
	}
	if got := OwnerOf(map[string]string{"owner": "terraform"}); got != (Owner{}) {
		t.Errorf("OwnerOf(foreign meta) = %+v, want the zero Owner", got)
	}
}

// TestMetaFitsConsulRules checks every key against Consul's key rules and every value
// against the length limit, for the longest inputs Kubernetes allows: a GatewayClass
// controllerName of 253 characters, a namespace of 63, a name of 253, a UID of 36. A
// --cluster-id has no Kubernetes limit; the longest that still fits is 512.
func TestMetaFitsConsulRules(t *testing.T) {
	o := Ownership{
		Controller: strings.Repeat("c", 240) + ".io/" + strings.Repeat("x", 9),
		ClusterID:  strings.Repeat("k", consulMetaValueMaxLength),
	}
	if len(o.Controller) != 253 {
		t.Fatalf("controller name has %d characters", len(o.Controller))
	}
	owner := Owner{
		Kind:      "HTTPRoute",
		Namespace: strings.Repeat("n", 63),
		Name:      strings.Repeat(strings.Repeat("a", 63)+".", 3) + strings.Repeat("b", 61),
		UID:       "0b6f5a1e-4c0d-4a8e-9a47-3f1c2d7e9b10",
	}
	if len(owner.Name) != 253 {
		t.Fatalf("name has %d characters", len(owner.Name))
	}
	meta := o.Meta(owner)
	if len(meta) > consulMetaMaxPairs {
		t.Errorf("%d meta pairs, Consul allows %d", len(meta), consulMetaMaxPairs)
	}
	for k, v := range meta {
		if !consulMetaKeyFormat.MatchString(k) {
			t.Errorf("meta key %q does not match %s", k, consulMetaKeyFormat)
		}
		if strings.HasPrefix(k, "consul-") {
			t.Errorf("meta key %q uses Consul's reserved prefix", k)
		}
		if len(k) > consulMetaKeyMaxLength {
			t.Errorf("meta key %q is longer than %d", k, consulMetaKeyMaxLength)
		}
		if len(v) > consulMetaValueMaxLength {
			t.Errorf("meta value of %q has %d characters, Consul allows %d", k, len(v), consulMetaValueMaxLength)
		}
	}
	if !o.Owns(meta) || OwnerOf(meta) != owner {
		t.Errorf("maximal meta does not round-trip: %v", meta)
	}
}

func TestOwnershipWithEmptyNamesOwnsNothing(t *testing.T) {
	empty := Ownership{}
	if empty.Owns(map[string]string{}) || empty.Owns(nil) {
		t.Error("an Ownership with empty names owns an entry without meta")
	}
	if err := empty.Validate(); err == nil {
		t.Error("Validate accepted empty names")
	}
	long := Ownership{Controller: "c", ClusterID: strings.Repeat("x", 513)}
	if err := long.Validate(); err == nil {
		t.Error("Validate accepted a cluster id over Consul's meta value limit")
	}
	if err := (Ownership{Controller: "example.com/c", ClusterID: "prod"}).Validate(); err != nil {
		t.Errorf("Validate refused good names: %v", err)
	}
}
