package gatewayapi

import (
	"fmt"
	"slices"
	"strings"
)

// KeyAllowlist says which keys of a Gateway's spec.infrastructure labels and
// annotations reach the objects deployed for it. Keys without a prefix
// ("team", "tier") always pass: Kubernetes leaves them to end users. A prefixed key
// ("service.beta.kubernetes.io/aws-load-balancer-type", "iam.gke.io/gcp-service-account")
// is how clouds and workload identity read a Service or ServiceAccount, so it passes
// only when the operator lists it: exactly, as "prefix/*", or with "*" for every key.
type KeyAllowlist []string

// Validate returns what is wrong with the patterns, one problem each.
func (a KeyAllowlist) Validate() []string {
	var problems []string
	for _, p := range a {
		switch {
		case p == "*":
		case p == "" || strings.Count(p, "*") > 1 || (strings.Contains(p, "*") && !strings.HasSuffix(p, "/*")):
			problems = append(problems, fmt.Sprintf("%q: want a key, \"prefix/*\" or \"*\"", p))
		}
	}
	return problems
}

// Allows reports whether key may be propagated.
func (a KeyAllowlist) Allows(key string) bool {
	if !strings.Contains(key, "/") {
		return true
	}
	for _, p := range a {
		if p == "*" || p == key {
			return true
		}
		if prefix, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(key, prefix) {
			return true
		}
	}
	return false
}

// Filter returns the entries of m whose keys a allows, and the refused keys, sorted.
func (a KeyAllowlist) Filter(m map[string]string) (allowed map[string]string, refused []string) {
	allowed = make(map[string]string, len(m))
	for k, v := range m {
		if a.Allows(k) {
			allowed[k] = v
			continue
		}
		refused = append(refused, k)
	}
	slices.Sort(refused)
	return allowed, refused
}

// RefusedInfrastructureKeys are the keys of a Gateway's spec.infrastructure labels and
// annotations that a does not let through, sorted and without repeats.
func (a KeyAllowlist) RefusedInfrastructureKeys(labels, annotations map[string]string) []string {
	_, l := a.Filter(labels)
	_, n := a.Filter(annotations)
	return slices.Compact(slices.Sorted(slices.Values(append(l, n...))))
}

// StringMap converts the typed keys and values of spec.infrastructure to plain strings.
func StringMap[K, V ~string](m map[K]V) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[string(k)] = string(v)
	}
	return out
}
