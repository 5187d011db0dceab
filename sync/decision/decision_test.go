package decision

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/tools/cache"
)

func resolvedWeb() Backend {
	return Backend{Ref: BackendRefIndex{Rule: 0, Ref: 1}, Resolved: true, Referent: cache.ObjectName{Namespace: "apps", Name: "web"}, Consul: "web", Port: 8080, ServiceUID: "uid-web"}
}

// TestEqualCoversEveryBackendField: a decision whose backend differs in any one field
// is another decision, so a changed resolution reaches the syncer. The fields are
// walked by reflection: a field added later is covered without editing this test.
func TestEqualCoversEveryBackendField(t *testing.T) {
	base := Route{Backends: []Backend{resolvedWeb()}}
	if !base.Equal(Route{Backends: []Backend{resolvedWeb()}}) {
		t.Fatal("a decision differs from its copy")
	}
	typ := reflect.TypeFor[Backend]()
	for i := range typ.NumField() {
		changed := resolvedWeb()
		field := reflect.ValueOf(&changed).Elem().Field(i)
		switch field.Kind() {
		case reflect.Bool:
			field.SetBool(!field.Bool())
		case reflect.String:
			field.SetString(field.String() + "-other")
		case reflect.Int32:
			field.SetInt(field.Int() + 1)
		case reflect.Struct: // BackendRefIndex, cache.ObjectName: change their first field
			first := field.Field(0)
			switch first.Kind() {
			case reflect.Int:
				first.SetInt(first.Int() + 1)
			case reflect.String:
				first.SetString(first.String() + "-other")
			default:
				t.Fatalf("field %s: cannot change a %s", typ.Field(i).Name, first.Kind())
			}
		default:
			t.Fatalf("field %s: cannot change a %s", typ.Field(i).Name, field.Kind())
		}
		if base.Equal(Route{Backends: []Backend{changed}}) {
			t.Errorf("decisions whose backends differ in %s are Equal", typ.Field(i).Name)
		}
	}
	if base.Equal(Route{}) {
		t.Error("a decision without backends equals one with")
	}
}

func TestBackendLookup(t *testing.T) {
	unresolved := Backend{Ref: BackendRefIndex{Rule: 1, Ref: 0}, Referent: cache.ObjectName{Namespace: "apps", Name: "gone"}}
	d := Route{Backends: []Backend{resolvedWeb(), unresolved}}
	if got, ok := d.Backend(BackendRefIndex{Rule: 1, Ref: 0}); !ok || got != unresolved {
		t.Errorf("Backend(1, 0) = %+v, %v; want %+v, true", got, ok, unresolved)
	}
	if _, ok := d.Backend(BackendRefIndex{Rule: 2, Ref: 0}); ok {
		t.Error("Backend(2, 0) found a backendRef the decision does not hold")
	}
	if diff := cmp.Diff([]BackendRefIndex{{Rule: 1, Ref: 0}}, d.Unresolved()); diff != "" {
		t.Errorf("Unresolved (-want +got):\n%s", diff)
	}
	renamed := resolvedWeb()
	renamed.Consul = "web-v2"
	for _, tt := range []struct {
		b    Backend
		want bool
	}{{resolvedWeb(), false}, {renamed, true}, {unresolved, false}} {
		if got := tt.b.Renamed(); got != tt.want {
			t.Errorf("%+v Renamed() = %v, want %v", tt.b, got, tt.want)
		}
	}
}
