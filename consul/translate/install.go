package translate

import (
	"maps"
	"slices"
	"strings"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/client-go/tools/cache"

	gwdecision "github.com/consul-gateway-controller/consul-gateway-controller/sync/decision"
)

// translateUnit brings one unit's translation up to date with what it reads now.
func (tr *Translator) translateUnit(u unit) {
	t := tr.state
	prev := tr.memo[u]
	source, decision, translate, ok := tr.source(u)
	if !ok {
		if prev != nil {
			tr.withdraw(u, prev)
			delete(tr.memo, u)
		}
		return
	}
	if prev != nil && t.stillHolds(prev, source, decision) {
		prev.source = source // the newest allocation of the version: the other can go
		return
	}
	out := t.translateObject(source, decision, translate)
	if u.kind < unitBackend { // a Gateway or a route
		tr.translated++
	}
	if prev != nil {
		keepEqual(out, prev)
		tr.withdraw(u, prev)
	}
	tr.install(u, out)
	tr.memo[u] = out
}

// source is what unit u translates now, and how; ok is false when it is gone.
func (tr *Translator) source(u unit) (source any, decision *gwdecision.Route, translate func(), ok bool) {
	t := tr.state
	switch u.kind {
	case unitGateway:
		gw := t.snap.Gateways[u.key]
		return gw, nil, func() { t.gateway(u.key, gw) }, gw != nil
	case unitBackend:
		b := u.backend()
		if b.Narrowed {
			return b, nil, func() { t.narrowedBackend(b) }, t.backends[b] > 0
		}
		return b, nil, func() { t.backendDefaults(b) }, t.backends[b] > 0 && t.opts.ManageServiceDefaults && !b.MeshService
	case unitSubsets:
		s := u.consulService()
		// The source names the namespaces, so a change of them translates the unit anew.
		source := subsetsSource{s, strings.Join(slices.Sorted(maps.Keys(t.subsets[s])), ",")}
		return source, nil, func() { t.put(subsetsResolver(s, t.subsets[s], t.naming, t.owner)) }, len(t.subsets[s]) > 0
	case unitBlackhole:
		s := u.consulService()
		return s, nil, func() { t.put(blackholeDefaults(s, t.naming, t.owner)) }, t.blackholes[s] > 0
	}
	for _, rt := range routeTranslations {
		if rt.unit == u.kind {
			c, found := t.snap.Routes[rt.kind][u.key]
			return c.Route, &c.Decision, func() { rt.translate(t, u.key, c) }, found
		}
	}
	return nil, nil, nil, false
}

// install adds a unit's translation to the desired state and to what others read.
func (tr *Translator) install(u unit, o *objectTranslation) {
	t := tr.state
	seen := map[EntryKey]bool{}
	for _, e := range o.entries {
		key := KeyOf(e)
		if seen[key] {
			continue // one unit's first entry under a key is its claim
		}
		seen[key] = true
		tr.replacing(key)
		claims := tr.claims[key]
		i, _ := slices.BinarySearchFunc(claims, u, func(c claim, u unit) int { return compareUnits(c.by, u) })
		tr.claims[key] = slices.Insert(claims, i, claim{by: u, entry: e})
	}
	if len(o.problems) > 0 {
		tr.problems[u] = o.problems
		tr.problemsChanged = true
	}
	if o.gateway != nil {
		tr.touch(lookupKey{readGateway, u.key})
		t.gateways[u.key] = o.gateway
	}
	for _, b := range o.backends {
		if t.backends[b]++; t.backends[b] == 1 {
			tr.dirty[backendUnit(b)] = true
		}
	}
	for _, s := range o.httpServices {
		tr.touch(lookupKey{readHTTPService, s})
		t.httpServices[s]++
	}
	for _, s := range o.blackholes {
		if t.blackholes[s]++; t.blackholes[s] == 1 {
			tr.dirty[blackholeUnit(s)] = true
		}
	}
	for _, use := range o.subsets {
		if t.subsets[use.service] == nil {
			t.subsets[use.service] = map[string]int{}
		}
		if t.subsets[use.service][use.kubeNamespace]++; t.subsets[use.service][use.kubeNamespace] == 1 {
			tr.dirty[subsetsUnit(use.service)] = true
		}
	}
	for _, r := range o.reads {
		k := lookupKey{r.kind, r.key}
		if tr.readers[k] == nil {
			tr.readers[k] = map[unit]struct{}{}
		}
		tr.readers[k][u] = struct{}{}
	}
}

// withdraw takes a unit's translation out of the desired state and of what others
// read: install undone.
func (tr *Translator) withdraw(u unit, o *objectTranslation) {
	t := tr.state
	for _, e := range o.entries {
		key := KeyOf(e)
		i := slices.IndexFunc(tr.claims[key], func(c claim) bool { return c.by == u })
		if i < 0 {
			continue // a second entry of the unit under the key: not a claim
		}
		tr.replacing(key)
		if tr.claims[key] = slices.Delete(tr.claims[key], i, i+1); len(tr.claims[key]) == 0 {
			delete(tr.claims, key)
		}
	}
	if _, had := tr.problems[u]; had {
		delete(tr.problems, u)
		tr.problemsChanged = true
	}
	if o.gateway != nil {
		tr.touch(lookupKey{readGateway, u.key})
		delete(t.gateways, u.key)
	}
	for _, b := range o.backends {
		if t.backends[b]--; t.backends[b] == 0 {
			delete(t.backends, b)
			tr.dirty[backendUnit(b)] = true
		}
	}
	for _, s := range o.httpServices {
		tr.touch(lookupKey{readHTTPService, s})
		if t.httpServices[s]--; t.httpServices[s] == 0 {
			delete(t.httpServices, s)
		}
	}
	for _, s := range o.blackholes {
		if t.blackholes[s]--; t.blackholes[s] == 0 {
			delete(t.blackholes, s)
			tr.dirty[blackholeUnit(s)] = true
		}
	}
	for _, use := range o.subsets {
		namespaces := t.subsets[use.service]
		if namespaces[use.kubeNamespace]--; namespaces[use.kubeNamespace] == 0 {
			delete(namespaces, use.kubeNamespace)
			tr.dirty[subsetsUnit(use.service)] = true
		}
		if len(namespaces) == 0 {
			delete(t.subsets, use.service)
		}
	}
	for _, r := range o.reads {
		k := lookupKey{r.kind, r.key}
		delete(tr.readers[k], u)
		if len(tr.readers[k]) == 0 {
			delete(tr.readers, k)
		}
	}
}

// replacing records what was desired under key before the change altered it.
func (tr *Translator) replacing(key EntryKey) {
	if _, ok := tr.replaced[key]; ok {
		return
	}
	var was consulapi.ConfigEntry
	if claims := tr.claims[key]; len(claims) > 0 {
		was = claims[0].entry
	}
	tr.replaced[key] = was
}

// sortedProblems is every unit's problems, sorted.
func (tr *Translator) sortedProblems() []Problem {
	var all []Problem
	for _, ps := range tr.problems {
		all = append(all, ps...)
	}
	return sortProblems(all)
}

// releaseUnread forgets the changed references no translation reads, and returns
// their keys.
func releaseUnread[V any](held, changed map[cache.ObjectName]V, readers map[lookupKey]map[unit]struct{}, kind readKind) []cache.ObjectName {
	var released []cache.ObjectName
	for key := range changed {
		if _, read := readers[lookupKey{kind, key}]; !read {
			delete(held, key)
			released = append(released, key)
		}
	}
	return released
}
