package translate

import (
	"slices"
	"strings"
	"testing"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/apimachinery/pkg/util/validation"
)

// checkConsul115Validation checks every entry against the validation Consul 1.15 applies
// (agent/structs config_entry_gateways.go, config_entry_routes.go) and the
// normalization it does on write, which must leave our entries unchanged, and checks
// the invariants the translation promises.
func checkConsul115Validation(t *testing.T, d Desired) {
	t.Helper()
	for key, e := range d.Entries {
		if KeyOf(e) != key {
			t.Errorf("entry under %v has key %v", key, KeyOf(e))
		}
		// The blackhole's service-defaults and the subsets of a shared name have no
		// Kubernetes owner (see blackhole.go, narrowed.go), and a MeshService is not in
		// the snapshot.
		objectOwned := !slices.Contains([]string{blackholeOwnerKind, narrowedOwnerKind, "MeshService"}, e.GetMeta()[metaKind])
		if e.GetMeta()[metaController] != testOwnership.Controller || (objectOwned && e.GetMeta()[metaUID] == "") {
			t.Errorf("%v: meta %v does not name its owner", key, e.GetMeta())
		}
		switch e := e.(type) {
		case *consulapi.APIGatewayConfigEntry:
			if len(e.Listeners) == 0 {
				t.Errorf("%v: api-gateway without listeners", key)
			}
			byPort := map[int]consulapi.APIGatewayListener{}
			for i, l := range e.Listeners {
				// Consul refuses two listeners of one name (validateListenerNames).
				if slices.ContainsFunc(e.Listeners[:i], func(o consulapi.APIGatewayListener) bool { return o.Name == l.Name }) {
					t.Errorf("%v: two listeners named %s", key, l.Name)
				}
				if l.Protocol != "http" && l.Protocol != "tcp" {
					t.Errorf("%v: listener %s protocol %q", key, l.Name, l.Protocol)
				}
				if l.Protocol == "tcp" && l.Hostname != "" {
					t.Errorf("%v: tcp listener %s has hostname", key, l.Name)
				}
				// Consul refuses two listeners of a port with different hostnames or
				// protocols (validateMergedListeners), and of two alike its xDS serves
				// one (it keys listeners by port and protocol): one per port.
				if other, ok := byPort[l.Port]; ok {
					t.Errorf("%v: listeners %s and %s on one port", key, other.Name, l.Name)
				}
				byPort[l.Port] = l
				for _, c := range l.TLS.Certificates {
					if c.Kind != consulapi.InlineCertificate || c.Name == "" {
						t.Errorf("%v: certificate ref %+v", key, c)
					}
					if _, ok := d.Entries[EntryKey{Kind: c.Kind, Name: c.Name, Namespace: c.Namespace, Partition: c.Partition}]; !ok {
						t.Errorf("%v: certificate %+v is not written", key, c)
					}
				}
			}
		case *consulapi.HTTPRouteConfigEntry:
			for _, h := range e.Hostnames {
				if strings.Contains(h, "*") {
					t.Errorf("%v: wildcard hostname %q", key, h)
				}
			}
			checkParents(t, d, key, e.Parents, "http")
			if len(e.Rules) == 0 {
				t.Errorf("%v: no rules", key)
			}
			for _, r := range e.Rules {
				if len(r.Matches) == 0 || len(r.Services) == 0 {
					t.Errorf("%v: rule without matches or services: %+v", key, r)
				}
				for _, m := range r.Matches {
					if m.Path.Match == "" {
						t.Errorf("%v: path match not written in full", key)
					}
					if m.Path.Match != consulapi.HTTPPathMatchRegularExpression && !strings.HasPrefix(m.Path.Value, "/") {
						t.Errorf("%v: path %q", key, m.Path.Value)
					}
				}
				for _, s := range r.Services {
					if s.Weight <= 0 {
						t.Errorf("%v: service %s weight %d", key, s.Name, s.Weight)
					}
				}
			}
		case *consulapi.TCPRouteConfigEntry:
			checkParents(t, d, key, e.Parents, "tcp")
			if len(e.Services) != 1 {
				t.Errorf("%v: %d services", key, len(e.Services))
			}
		case *consulapi.InlineCertificateConfigEntry:
			if e.Certificate == "" || e.PrivateKey == "" {
				t.Errorf("%v: empty certificate", key)
			}
		case *consulapi.ServiceConfigEntry:
			// Only a narrowed backend's service of ours may be a tcp-route's.
			narrowed := strings.HasPrefix(e.Name, "consul_gateway_controller_")
			if e.Protocol != "http" && (!narrowed || e.Protocol != "tcp") {
				t.Errorf("%v: protocol %q", key, e.Protocol)
			}
		case *consulapi.ServiceResolverConfigEntry:
			checkResolver(t, d, key, e)
		default:
			t.Errorf("%v: unexpected entry %T", key, e)
		}
	}
}

// checkResolver: a resolver either redirects to a subset that the written resolver of
// its target defines, or defines subsets named as Consul wants them (a DNS label, as
// they end up in SNI) with a filter on the instances' Kubernetes namespace.
func checkResolver(t *testing.T, d Desired, key EntryKey, e *consulapi.ServiceResolverConfigEntry) {
	t.Helper()
	if r := e.Redirect; r != nil {
		target, ok := d.Entries[EntryKey{Kind: consulapi.ServiceResolver, Name: r.Service, Namespace: r.Namespace, Partition: r.Partition}].(*consulapi.ServiceResolverConfigEntry)
		if len(e.Subsets) > 0 || !ok {
			t.Errorf("%v: redirect to %+v, whose resolver is not written, or with subsets of its own", key, r)
			return
		}
		if _, ok := target.Subsets[r.ServiceSubset]; !ok {
			t.Errorf("%v: redirect to subset %q, which %s's resolver does not define", key, r.ServiceSubset, r.Service)
		}
		return
	}
	if len(e.Subsets) == 0 {
		t.Errorf("%v: resolver with neither redirect nor subsets", key)
	}
	for name, s := range e.Subsets {
		if len(validation.IsDNS1123Label(name)) > 0 || s.Filter != KubeNamespaceFilter(name) {
			t.Errorf("%v: subset %q with filter %q", key, name, s.Filter)
		}
	}
}

// checkParents: parents are unique, name a written listener of the route's protocol.
func checkParents(t *testing.T, d Desired, key EntryKey, parents []consulapi.ResourceReference, protocol string) {
	t.Helper()
	if len(parents) == 0 {
		t.Errorf("%v: no parents", key)
	}
	for i, p := range parents {
		if slices.Contains(parents[:i], p) {
			t.Errorf("%v: duplicate parent %+v", key, p)
		}
		gw, ok := d.Entries[EntryKey{Kind: consulapi.APIGateway, Name: p.Name, Namespace: p.Namespace, Partition: p.Partition}].(*consulapi.APIGatewayConfigEntry)
		if p.Kind != consulapi.APIGateway || !ok {
			t.Errorf("%v: parent %+v is not a written api-gateway", key, p)
			continue
		}
		if !slices.ContainsFunc(gw.Listeners, func(l consulapi.APIGatewayListener) bool { return l.Name == p.SectionName && l.Protocol == protocol }) {
			t.Errorf("%v: parent %+v names no %s listener", key, p, protocol)
		}
	}
}
