package intentions

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

// Service names a Consul service: a gateway's (a source) or one a route sends to (a
// destination). Namespace and Partition are "" on Consul CE; "default" is written as
// "" so that an entry Consul Enterprise returns with "default" names the same service.
type Service struct {
	Name      string
	Namespace string
	Partition string
}

// NewService returns the service of name in namespace and partition, normalized.
func NewService(name, namespace, partition string) Service {
	return Service{Name: name, Namespace: normalizeTenancy(namespace), Partition: normalizeTenancy(partition)}
}

func normalizeTenancy(v string) string {
	if v == "default" {
		return ""
	}
	return v
}

func (s Service) String() string {
	switch {
	case s.Partition != "":
		return s.Partition + "/" + cmp.Or(s.Namespace, "default") + "/" + s.Name
	case s.Namespace != "":
		return s.Namespace + "/" + s.Name
	}
	return s.Name
}

func compareServices(a, b Service) int {
	return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// Route is what one route entry asks of intentions: each of its parent gateways must
// reach each of its services.
type Route struct {
	Gateways []Service
	Services []Service
}

// RouteOf reads an http-route or tcp-route entry; ok is false for any other kind.
// Parents of another kind than api-gateway are not gateways and ask for nothing.
func RouteOf(entry consulapi.ConfigEntry) (Route, bool) {
	var r Route
	var parents []consulapi.ResourceReference
	switch e := entry.(type) {
	case *consulapi.HTTPRouteConfigEntry:
		parents = e.Parents
		for _, rule := range e.Rules {
			for _, s := range rule.Services {
				r.Services = append(r.Services, NewService(s.Name, s.Namespace, s.Partition))
			}
		}
	case *consulapi.TCPRouteConfigEntry:
		parents = e.Parents
		for _, s := range e.Services {
			r.Services = append(r.Services, NewService(s.Name, s.Namespace, s.Partition))
		}
	default:
		return Route{}, false
	}
	for _, p := range parents {
		if p.Kind == consulapi.APIGateway || p.Kind == "" {
			r.Gateways = append(r.Gateways, NewService(p.Name, p.Namespace, p.Partition))
		}
	}
	r.Gateways = sortedUnique(r.Gateways)
	r.Services = sortedUnique(r.Services)
	return r, true
}

func sortedUnique(s []Service) []Service {
	slices.SortFunc(s, compareServices)
	return slices.Compact(s)
}

// Needs maps each destination to the gateways that must reach it.
type Needs map[Service]map[Service]bool

// NeedsOf computes what routes need: each route's gateways reach each target of each
// of its services. targets gives a service's discovery chain targets; a service it
// does not know is its own only target.
func NeedsOf(routes []Route, targets map[Service][]Service) Needs {
	needs := Needs{}
	for _, r := range routes {
		for _, s := range r.Services {
			dests, ok := targets[s]
			if !ok {
				dests = []Service{s}
			}
			for _, d := range dests {
				if needs[d] == nil {
					needs[d] = map[Service]bool{}
				}
				for _, g := range r.Gateways {
					needs[d][g] = true
				}
			}
		}
	}
	return needs
}

// changedDestinations lists the destinations whose gateways differ between before and after.
func changedDestinations(before, after Needs) []Service {
	var out []Service
	for d, gateways := range after {
		if !maps.Equal(before[d], gateways) {
			out = append(out, d)
		}
	}
	for d := range before {
		if _, ok := after[d]; !ok {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, compareServices)
	return out
}

// Marker is the Description of every source this controller and cluster write: the
// mark that tells them from everyone else's. Consul keeps at most 512 characters there;
// a longer one is replaced by its hash.
func Marker(o translate.Ownership) string {
	m := fmt.Sprintf("Allows an API gateway of consul-gateway-controller %q (cluster %q) to reach what its routes send to", o.Controller, o.ClusterID)
	if len(m) <= descriptionMaxLength {
		return m
	}
	sum := sha256.Sum256([]byte(m))
	return "Allows an API gateway of consul-gateway-controller " + hex.EncodeToString(sum[:]) + " to reach what its routes send to"
}

// descriptionMaxLength is Consul's limit on a source's Description.
const descriptionMaxLength = 512

// externalSourceMeta is the meta consul-k8s records on the entries its
// ServiceIntentions resources write; it rewrites such an entry whole.
const (
	externalSourceMeta       = "external-source"
	externalSourceKubernetes = "kubernetes"
)

// Plan is what one destination's service-intentions entry needs.
type Plan struct {
	// Entry is the entry to write; nil when nothing is written.
	Entry *consulapi.ServiceIntentionsConfigEntry
	// Delete is set when the entry must go: it would be left with no source.
	Delete bool
	// Foreign are gateways that need the destination but that a source of another
	// writer already names: it is left as it is, whatever it says.
	Foreign []Service
	// ManagedElsewhere is set when consul-k8s's ServiceIntentions manage the entry: it
	// is left as it is, and the gateways that need it must be allowed there.
	ManagedElsewhere bool
}

// PlanEntry compares current (nil when Consul has none) with what the destination
// needs: a source of ours, marked with marker, for each gateway in want and no other.
// Sources of others keep their place and content. meta is the Meta of an entry this
// controller creates.
func PlanEntry(current *consulapi.ServiceIntentionsConfigEntry, dest Service, want map[Service]bool, marker string, meta map[string]string) Plan {
	if current != nil && current.Meta[externalSourceMeta] == externalSourceKubernetes {
		return Plan{ManagedElsewhere: true}
	}
	var sources []*consulapi.SourceIntention
	if current != nil {
		sources = current.Sources
	}
	kept, changed, named := keptSources(sources, want, marker)
	var plan Plan
	for _, g := range sortedKeys(want) {
		switch named[g] {
		case foreignSource:
			plan.Foreign = append(plan.Foreign, g)
		case noSource:
			kept = append(kept, ourSource(g, marker))
			changed = true
		}
	}
	switch {
	case !changed:
		return plan
	case len(kept) == 0:
		plan.Delete = current != nil
		return plan
	}
	plan.Entry = &consulapi.ServiceIntentionsConfigEntry{
		Kind:      consulapi.ServiceIntentions,
		Name:      dest.Name,
		Namespace: dest.Namespace,
		Partition: dest.Partition,
		Sources:   kept,
		Meta:      meta,
	}
	if current != nil {
		plan.Entry.Meta = current.Meta
	}
	return plan
}

type sourceOwner int

const (
	noSource sourceOwner = iota
	ourSourceHeld
	foreignSource
)

// keptSources are sources without the ones of ours that are not wanted, and with the
// ones of ours that drifted put back; changed says whether anything was. named says,
// for each gateway in want, who holds a source naming it.
func keptSources(sources []*consulapi.SourceIntention, want map[Service]bool, marker string) (kept []*consulapi.SourceIntention, changed bool, named map[Service]sourceOwner) {
	named = map[Service]sourceOwner{}
	for _, src := range sources {
		name := NewService(src.Name, src.Namespace, src.Partition)
		ours := src.Description == marker && src.Peer == ""
		switch {
		case !ours:
			if src.Peer == "" && want[name] {
				named[name] = foreignSource
			}
			kept = append(kept, src)
		case !want[name] || named[name] != noSource:
			changed = true // not needed, or a second source of ours for one gateway
		case !isOurSource(src, name, marker):
			named[name] = ourSourceHeld
			kept = append(kept, ourSource(name, marker))
			changed = true
		default:
			named[name] = ourSourceHeld
			kept = append(kept, src)
		}
	}
	return kept, changed, named
}

// ourSource is the source that lets gateway reach the destination.
func ourSource(gateway Service, marker string) *consulapi.SourceIntention {
	return &consulapi.SourceIntention{
		Name:        gateway.Name,
		Namespace:   gateway.Namespace,
		Partition:   gateway.Partition,
		Action:      consulapi.IntentionActionAllow,
		Type:        consulapi.IntentionSourceConsul,
		Description: marker,
	}
}

// isOurSource reports whether src is exactly what ourSource writes for gateway; the
// fields Consul fills in itself (Precedence, the legacy ones) are not compared.
func isOurSource(src *consulapi.SourceIntention, gateway Service, marker string) bool {
	return src.Action == consulapi.IntentionActionAllow && len(src.Permissions) == 0 &&
		(src.Type == consulapi.IntentionSourceConsul || src.Type == "") &&
		src.SamenessGroup == "" && src.Description == marker &&
		NewService(src.Name, src.Namespace, src.Partition) == gateway
}

func sortedKeys(m map[Service]bool) []Service {
	out := slices.Collect(maps.Keys(m))
	slices.SortFunc(out, compareServices)
	return out
}
