package consul

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"reflect"
	"strconv"
	"strings"

	consulapi "github.com/hashicorp/consul/api"
)

// Compact wraps entry so that it is written in the encoding that older Consul servers
// accept. Pass the result to the client's ConfigEntries().Set or CAS: the client
// JSON-encodes the entry it is given, and the wrapper's MarshalJSON is that encoding.
// The getters are entry's own.
//
// Why: consul/api encodes every field of its structs, including ones added after the
// server's release, and many of them even when unset (no omitempty): an api-gateway's
// top-level TLS as {"Enabled": false}; an http-route's Filters.JWT, RetryFilter,
// TimeoutFilter, ExtProc and ExtAuthz as null and its ResponseFilters as
// {"Headers": null}. Consul 1.15 decodes a config entry with mapstructure and refuses
// every key its own struct lacks, whatever the value - null, "", 0, false, {} and []
// alike: `invalid config key "TLS"`, `invalid config key "Rules[0].Filters.JWT"`
// (and, on CE, `invalid config key "Namespace", namespaces are a consul enterprise
// feature` even for ""). The key, not the value, is the problem, so unset fields must
// not be encoded at all.
//
// The rule: after encoding/json has encoded entry, a struct field's key is removed when
// its value is null, false, 0, "", or - once the value's own fields have been removed
// by the same rule - an object without keys or an array without elements. That is
// lossless for every server: Consul decodes into Go structs where an absent key and a
// zero value are the same zero value, so a zero field only ever carries a meaning
// through a pointer (nil versus a pointer to zero). Hence two exceptions:
//
//   - A field that is a non-nil pointer is kept even when it points to a zero value
//     (UpstreamLimits.MaxConnections = 0, PassiveHealthCheck.EnforcingConsecutive5xx =
//     0, an empty URLRewrite): the caller set it, and a server that does not know the
//     field must refuse it rather than have it dropped silently.
//   - Only struct fields are removed. Array elements and map entries are data, not
//     schema, and are always kept, with their own struct fields compacted: a header
//     filter's Set {"X-Empty": ""}, Meta {"k": ""}, a match list [{}] keep their shape,
//     and opaque maps (service-defaults EnvoyExtensions Arguments) pass unchanged.
//
// Zero values that are meaningful on fields Consul 1.15 knows without a pointer are
// indistinguishable from absent there anyway: a listener Port is never 0 in a valid
// entry, an HTTPService Weight of 0 is normalized to 1, an empty path Match becomes
// prefix "/", an empty Method means every method.
//
// Keys that a type's own MarshalJSON produces in place of a struct field (the client
// has such types for service-resolver, service-router, mesh and exported-services) are
// compacted by that field: a service-resolver's ConnectTimeout and RequestTimeout are
// durations written as strings, and dropped when zero. Of those kinds this controller
// writes only service-resolver.
//
// Reading needs nothing: the client decodes Get and List answers with encoding/json,
// which ignores keys it does not know and leaves fields a server does not send at zero.
func Compact(entry consulapi.ConfigEntry) consulapi.ConfigEntry {
	if entry == nil {
		return nil
	}
	if c, ok := entry.(compactEntry); ok {
		return c
	}
	return compactEntry{entry}
}

// compactEntry is the wrapper Compact returns. The embedded entry supplies the getters.
type compactEntry struct {
	consulapi.ConfigEntry
}

// Unwrap returns the entry Compact was given.
func (c compactEntry) Unwrap() consulapi.ConfigEntry { return c.ConfigEntry }

// MarshalJSON encodes the wrapped entry with encoding/json and removes the keys of
// unset fields (see Compact).
func (c compactEntry) MarshalJSON() ([]byte, error) {
	return compactJSON(c.ConfigEntry)
}

// compactJSON returns the JSON encoding of v by the rule Compact documents.
func compactJSON(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // keep numbers exactly as encoded: no float64 rounding of uint64s
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, fmt.Errorf("decode own encoding of %T: %w", v, err)
	}
	tree, _ = compactValue(reflect.ValueOf(v), tree)
	return json.Marshal(tree)
}

// compactValue compacts the encoded value j of the Go value v and reports whether its
// key must be kept when it is a struct field. v may be invalid when the Go value behind
// j is unknown; j is then compacted as if its objects were structs.
func compactValue(v reflect.Value, j any) (any, bool) {
	explicit := false
	for v.IsValid() && (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) {
		if v.IsNil() {
			v = reflect.Value{}
			break
		}
		if v.Kind() == reflect.Pointer {
			explicit = true
		}
		v = v.Elem()
	}
	switch j := j.(type) {
	case nil:
		return nil, false
	case map[string]any:
		if v.IsValid() && v.Kind() == reflect.Map {
			for k, child := range j {
				j[k], _ = compactValue(mapValue(v, k), child)
			}
		} else {
			var fields map[string]reflect.Value
			if v.IsValid() && v.Kind() == reflect.Struct {
				fields = jsonFields(v)
			}
			for k, child := range j {
				child, keep := compactValue(fields[k], child)
				if keep {
					j[k] = child
				} else {
					delete(j, k)
				}
			}
		}
		return j, explicit || len(j) > 0
	case []any:
		sliceLike := v.IsValid() && (v.Kind() == reflect.Slice || v.Kind() == reflect.Array) && v.Len() == len(j)
		for i, child := range j {
			var elem reflect.Value
			if sliceLike {
				elem = v.Index(i)
			}
			j[i], _ = compactValue(elem, child)
		}
		return j, explicit || len(j) > 0
	}
	// A scalar. A Go value that is zero is unset even when its encoding is not empty
	// (a zero time.Time encodes as "0001-01-01T00:00:00Z").
	if explicit {
		return j, true
	}
	if v.IsValid() && v.IsZero() {
		return j, false
	}
	switch j := j.(type) {
	case bool:
		return j, j
	case string:
		return j, j != ""
	case json.Number:
		f, err := strconv.ParseFloat(j.String(), 64)
		return j, err != nil || f != 0
	default:
		return j, true
	}
}

// mapValue is the element of map m that encoding/json encoded under key k, or an
// invalid Value when the key does not convert back.
func mapValue(m reflect.Value, k string) reflect.Value {
	keyType := m.Type().Key()
	var key reflect.Value
	switch keyType.Kind() {
	case reflect.String:
		key = reflect.ValueOf(k).Convert(keyType)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(k, 10, 64)
		if err != nil {
			return reflect.Value{}
		}
		key = reflect.New(keyType).Elem()
		key.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n, err := strconv.ParseUint(k, 10, 64)
		if err != nil {
			return reflect.Value{}
		}
		key = reflect.New(keyType).Elem()
		key.SetUint(n)
	default:
		return reflect.Value{}
	}
	return m.MapIndex(key)
}

// jsonFields maps the keys encoding/json writes for struct v to the field values, with
// the fields of embedded structs promoted as encoding/json promotes them (a shallower
// field wins).
func jsonFields(v reflect.Value) map[string]reflect.Value {
	fields := make(map[string]reflect.Value)
	type level struct {
		v     reflect.Value
		depth int
	}
	depthOf := make(map[string]int)
	queue := []level{{v, 0}}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		t := cur.v.Type()
		for i := range t.NumField() {
			sf := t.Field(i)
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			fv := cur.v.Field(i)
			if sf.Anonymous && name == "" {
				ft := sf.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
					if fv.IsNil() {
						continue
					}
					fv = fv.Elem()
				}
				if ft.Kind() == reflect.Struct {
					queue = append(queue, level{fv, cur.depth + 1})
					continue
				}
			}
			if !sf.IsExported() {
				continue
			}
			if name == "" {
				name = sf.Name
			}
			if d, seen := depthOf[name]; seen && d <= cur.depth {
				continue
			}
			depthOf[name] = cur.depth
			fields[name] = fv
		}
	}
	return fields
}

// How entries are compared: the desired entry with the one Consul holds (sameEntry),
// and what the ledger keeps of them (fingerprint, contentOf).

// sameEntry reports whether Consul's entry already says what desired says. Both are
// compared in the encoding the syncer writes, without the fields Consul manages
// (indexes, status) and the defaults it fills in when it stores an entry.
func sameEntry(desired, actual consulapi.ConfigEntry) bool {
	want, err := comparableForm(desired)
	if err != nil {
		return false
	}
	got, err := comparableForm(actual)
	if err != nil {
		return false
	}
	return reflect.DeepEqual(want, got)
}

// serverManaged are top-level fields Consul sets on every entry it stores.
var serverManaged = []string{"CreateIndex", "ModifyIndex", "Status", "Hash"}

// comparableForm is an entry as a generic map, in the encoding the syncer writes,
// without what Consul manages or fills in.
func comparableForm(entry consulapi.ConfigEntry) (map[string]any, error) {
	raw, err := json.Marshal(Compact(entry))
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	for _, k := range serverManaged {
		delete(m, k)
	}
	if meta, ok := m["Meta"].(map[string]any); ok {
		delete(meta, metaRejudge)
		delete(meta, metaChainRefresh)
	}
	// Consul answers with empty objects for optional blocks nobody set (a
	// service-defaults' TransparentProxy {}), which Compact keeps when written as
	// non-nil pointers; both sides lose every zero value before comparing.
	pruneZero(m)
	// Consul CE reports the default namespace and partition by name on read.
	for _, k := range []string{"Namespace", "Partition"} {
		if m[k] == "default" {
			delete(m, k)
		}
	}
	return m, nil
}

// pruneZero removes, recursively, map keys whose values are null, false, 0, "", or
// become empty objects or arrays.
func pruneZero(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		for k, child := range x {
			if pruneZero(child) {
				delete(x, k)
			}
		}
		return len(x) == 0
	case []any:
		for _, child := range x {
			pruneZero(child)
		}
		return len(x) == 0
	case bool:
		return !x
	case float64:
		return x == 0
	case string:
		return x == ""
	default:
		return false
	}
}

// fingerprint hashes an entry's comparable form: equal for entries sameEntry calls
// equal. encoding/json writes map keys sorted, so the bytes are stable.
func fingerprint(entry consulapi.ConfigEntry) (uint64, bool) {
	form, err := comparableForm(entry)
	if err != nil {
		return 0, false
	}
	raw, err := json.Marshal(form)
	if err != nil {
		return 0, false
	}
	h := fnv.New64a()
	_, _ = h.Write(raw)
	return h.Sum64(), true
}

// contentOf is a copy of entry without the fields Consul manages (serverManaged).
func contentOf(entry consulapi.ConfigEntry) any {
	v := reflect.ValueOf(entry)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return entry
	}
	c := reflect.New(v.Elem().Type()).Elem()
	c.Set(v.Elem())
	for _, name := range serverManaged {
		if f := c.FieldByName(name); f.IsValid() && f.CanSet() {
			f.SetZero()
		}
	}
	return c.Interface()
}
