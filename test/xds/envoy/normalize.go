package envoy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

var (
	// Consul's trust domain is "<cluster id>.consul", a UUID new with every CA.
	trustDomain = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.consul`)
	pemBlock    = regexp.MustCompile(`-----BEGIN ([A-Z ]+)-----[\s\S]*?-----END [A-Z ]+-----\n?`)
)

// Normalize prints a configuration as stable JSON for golden files: resources by type
// and name, virtual hosts sorted by name (Envoy picks them by domain, not order),
// routes in their order (which decides), header operations by header (see headerKey),
// the trust domain and every PEM block (leaf
// certificates, CA roots, keys) replaced, and each old → new pair of replace applied
// (addresses and names of pods that change from run to run).
func Normalize(c *Config, replace map[string]string) ([]byte, error) {
	out := map[string]map[string]any{}
	add := func(typ, name string, m proto.Message) error {
		b, err := protojson.Marshal(m)
		if err != nil {
			return fmt.Errorf("%s %s: %w", typ, name, err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		if out[typ] == nil {
			out[typ] = map[string]any{}
		}
		out[typ][scrub(name, replace)] = normalizeValue(v, replace)
		return nil
	}
	for name, m := range c.Clusters {
		if err := add("clusters", name, m); err != nil {
			return nil, err
		}
	}
	for name, m := range c.Endpoints {
		if err := add("endpoints", name, m); err != nil {
			return nil, err
		}
	}
	for name, m := range c.Listeners {
		if err := add("listeners", name, m); err != nil {
			return nil, err
		}
	}
	for name, m := range c.Routes {
		if err := add("routes", name, m); err != nil {
			return nil, err
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func normalizeValue(v any, replace map[string]string) any {
	switch x := v.(type) {
	case string:
		return scrub(x, replace)
	case []any:
		for i := range x {
			x[i] = normalizeValue(x[i], replace)
		}
		return x
	case map[string]any:
		for k, val := range x {
			x[k] = normalizeValue(val, replace)
		}
		if hosts, ok := x["virtualHosts"].([]any); ok {
			sort.SliceStable(hosts, func(i, j int) bool { return nameOf(hosts[i]) < nameOf(hosts[j]) })
		}
		for _, list := range []string{"requestHeadersToAdd", "responseHeadersToAdd"} {
			if ops, ok := x[list].([]any); ok {
				sort.SliceStable(ops, func(i, j int) bool { return headerKey(ops[i]) < headerKey(ops[j]) })
			}
		}
		return x
	}
	return v
}

// headerKey is the header a header operation sets. Consul 1.15 merges a rule's and a
// backend's header filters in map order, so the same route comes with the operations
// on different headers in either order (seen in the backends scenario); Envoy applies
// them in order, which matters only for one header, and a stable sort keeps that.
func headerKey(v any) string {
	m, _ := v.(map[string]any)
	h, _ := m["header"].(map[string]any)
	s, _ := h["key"].(string)
	return s
}

func nameOf(v any) string {
	m, _ := v.(map[string]any)
	s, _ := m["name"].(string)
	return s
}

func scrub(s string, replace map[string]string) string {
	s = trustDomain.ReplaceAllString(s, "TRUST-DOMAIN.consul")
	s = pemBlock.ReplaceAllString(s, "<PEM $1>")
	// Longest first, so that no replacement cuts into a longer one.
	olds := make([]string, 0, len(replace))
	for old := range replace {
		olds = append(olds, old)
	}
	sort.Slice(olds, func(i, j int) bool {
		return len(olds[i]) > len(olds[j]) || len(olds[i]) == len(olds[j]) && olds[i] < olds[j]
	})
	for _, old := range olds {
		s = strings.ReplaceAll(s, old, replace[old])
	}
	return s
}
