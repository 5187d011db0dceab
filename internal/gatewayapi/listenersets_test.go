package gatewayapi

import (
	"regexp"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// consulListenerName is Consul 1.15's listenerNameRegex (agent/structs/config_entry_gateways.go).
var consulListenerName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

func TestListenerSetListenerNameIsAConsulListenerName(t *testing.T) {
	for _, tt := range []struct {
		set     cache.ObjectName
		section gatewayv1.SectionName
		want    gatewayv1.SectionName
	}{
		{cache.ObjectName{Namespace: "apps", Name: "extra"}, "web", "apps.extra.web"},
		{cache.ObjectName{Namespace: "a-1", Name: "x.y"}, "z-0", "a-1.x.y.z-0"},
	} {
		got := ListenerSetListenerName(tt.set, tt.section)
		if got != tt.want || !consulListenerName.MatchString(string(got)) {
			t.Errorf("ListenerSetListenerName(%s, %s) = %q, want %q matching Consul's pattern", tt.set, tt.section, got, tt.want)
		}
	}
}

func TestIsListenerSet(t *testing.T) {
	group, kind := gatewayv1.Group(gatewayv1.GroupName), gatewayv1.Kind("ListenerSet")
	other := gatewayv1.Group("example.com")
	for _, tt := range []struct {
		ref  gatewayv1.ParentReference
		want bool
	}{
		{gatewayv1.ParentReference{Group: &group, Kind: &kind, Name: "s"}, true},
		{gatewayv1.ParentReference{Kind: &kind, Name: "s"}, true}, // the group defaults to the Gateway API's
		{gatewayv1.ParentReference{Group: &other, Kind: &kind, Name: "s"}, false},
		{gatewayv1.ParentReference{Name: "gw"}, false},
	} {
		if got := IsListenerSet(tt.ref); got != tt.want {
			t.Errorf("IsListenerSet(%+v) = %v, want %v", tt.ref, got, tt.want)
		}
	}
}

func TestCompareListenerSets(t *testing.T) {
	at := func(ns, name string, minute int) *gatewayv1.ListenerSet {
		return &gatewayv1.ListenerSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			CreationTimestamp: metav1.Date(2026, 1, 1, 0, minute, 0, 0, metav1.Now().Location())}}
	}
	if CompareListenerSets(at("z", "z", 1), at("a", "a", 2)) >= 0 {
		t.Error("an older ListenerSet must come first whatever its name")
	}
	if CompareListenerSets(at("b", "a", 1), at("a", "b", 1)) <= 0 {
		t.Error("of two created together, a/b comes before b/a")
	}
}
