package sync

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewaylisters "sigs.k8s.io/gateway-api/pkg/client/listers/apis/v1"
)

// grantListerOf returns a ReferenceGrant lister over exactly the given grants.
func grantListerOf(t *testing.T, grants ...*gatewayv1.ReferenceGrant) gatewaylisters.ReferenceGrantLister {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, g := range grants {
		if err := indexer.Add(g); err != nil {
			t.Fatalf("seed ReferenceGrant %s/%s: %v", g.Namespace, g.Name, err)
		}
	}
	return gatewaylisters.NewReferenceGrantLister(indexer)
}

// refGrant builds a grant in namespace with one From and one To entry per argument.
func refGrant(namespace, name string, from []gatewayv1.ReferenceGrantFrom, to []gatewayv1.ReferenceGrantTo) *gatewayv1.ReferenceGrant {
	return &gatewayv1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       gatewayv1.ReferenceGrantSpec{From: from, To: to},
	}
}

// failingGrantLister fails every List, to check that cache errors are passed on.
type failingGrantLister struct{ err error }

func (f failingGrantLister) List(labels.Selector) ([]*gatewayv1.ReferenceGrant, error) {
	return nil, f.err
}

func (f failingGrantLister) ReferenceGrants(string) gatewaylisters.ReferenceGrantNamespaceLister {
	return failingGrantNamespaceLister(f)
}

type failingGrantNamespaceLister struct{ err error }

func (f failingGrantNamespaceLister) List(labels.Selector) ([]*gatewayv1.ReferenceGrant, error) {
	return nil, f.err
}

func (f failingGrantNamespaceLister) Get(string) (*gatewayv1.ReferenceGrant, error) {
	return nil, f.err
}

func TestReferencePermitted(t *testing.T) {
	routeFrom := referenceFrom{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: "apps"}
	svcTo := referenceTo{Group: "", Kind: "Service", Namespace: "backend", Name: "web"}
	fromRoutes := []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: "apps"}}
	toServices := []gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Service"}}

	tests := []struct {
		name   string
		grants []*gatewayv1.ReferenceGrant
		from   referenceFrom
		to     referenceTo
		want   bool
	}{
		{
			name: "same namespace needs no grant",
			from: routeFrom,
			to:   referenceTo{Kind: "Service", Namespace: "apps", Name: "web"},
			want: true,
		},
		{
			name: "cross namespace without grant",
			from: routeFrom,
			to:   svcTo,
			want: false,
		},
		{
			name:   "grant for all Services of the namespace",
			grants: []*gatewayv1.ReferenceGrant{refGrant("backend", "g", fromRoutes, toServices)},
			from:   routeFrom,
			to:     svcTo,
			want:   true,
		},
		{
			name: "grant naming the Service",
			grants: []*gatewayv1.ReferenceGrant{refGrant("backend", "g", fromRoutes,
				[]gatewayv1.ReferenceGrantTo{{Kind: "Service", Name: new(gatewayv1.ObjectName("web"))}})},
			from: routeFrom,
			to:   svcTo,
			want: true,
		},
		{
			name: "grant naming another Service",
			grants: []*gatewayv1.ReferenceGrant{refGrant("backend", "g", fromRoutes,
				[]gatewayv1.ReferenceGrantTo{{Kind: "Service", Name: new(gatewayv1.ObjectName("db"))}})},
			from: routeFrom,
			to:   svcTo,
			want: false,
		},
		{
			name: "empty name is not a wildcard",
			grants: []*gatewayv1.ReferenceGrant{refGrant("backend", "g", fromRoutes,
				[]gatewayv1.ReferenceGrantTo{{Kind: "Service", Name: new(gatewayv1.ObjectName(""))}})},
			from: routeFrom,
			to:   svcTo,
			want: false,
		},
		{
			name:   "grant in the referring namespace does not count",
			grants: []*gatewayv1.ReferenceGrant{refGrant("apps", "g", fromRoutes, toServices)},
			from:   routeFrom,
			to:     svcTo,
			want:   false,
		},
		{
			name: "grant from another namespace",
			grants: []*gatewayv1.ReferenceGrant{refGrant("backend", "g",
				[]gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: "other"}}, toServices)},
			from: routeFrom,
			to:   svcTo,
			want: false,
		},
		{
			name: "grant from another kind",
			grants: []*gatewayv1.ReferenceGrant{refGrant("backend", "g",
				[]gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "TCPRoute", Namespace: "apps"}}, toServices)},
			from: routeFrom,
			to:   svcTo,
			want: false,
		},
		{
			name: "grant from another group",
			grants: []*gatewayv1.ReferenceGrant{refGrant("backend", "g",
				[]gatewayv1.ReferenceGrantFrom{{Group: "example.com", Kind: "HTTPRoute", Namespace: "apps"}}, toServices)},
			from: routeFrom,
			to:   svcTo,
			want: false,
		},
		{
			name: "grant to another kind",
			grants: []*gatewayv1.ReferenceGrant{refGrant("backend", "g", fromRoutes,
				[]gatewayv1.ReferenceGrantTo{{Kind: "Secret"}})},
			from: routeFrom,
			to:   svcTo,
			want: false,
		},
		{
			name: "core group spelled core is not the core group",
			grants: []*gatewayv1.ReferenceGrant{refGrant("backend", "g", fromRoutes,
				[]gatewayv1.ReferenceGrantTo{{Group: "core", Kind: "Service"}})},
			from: routeFrom,
			to:   svcTo,
			want: false,
		},
		{
			name: "one of several From and To entries matches",
			grants: []*gatewayv1.ReferenceGrant{refGrant("backend", "g",
				[]gatewayv1.ReferenceGrantFrom{
					{Group: gatewayv1.GroupName, Kind: "Gateway", Namespace: "apps"},
					{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: "apps"},
				},
				[]gatewayv1.ReferenceGrantTo{{Kind: "Secret"}, {Kind: "Service"}})},
			from: routeFrom,
			to:   svcTo,
			want: true,
		},
		{
			name: "From and To from different grants do not combine",
			grants: []*gatewayv1.ReferenceGrant{
				refGrant("backend", "from-only", fromRoutes, []gatewayv1.ReferenceGrantTo{{Kind: "Secret"}}),
				refGrant("backend", "to-only",
					[]gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "Gateway", Namespace: "apps"}}, toServices),
			},
			from: routeFrom,
			to:   svcTo,
			want: false,
		},
		{
			name: "Gateway to Secret",
			grants: []*gatewayv1.ReferenceGrant{refGrant("certs", "g",
				[]gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "Gateway", Namespace: "infra"}},
				[]gatewayv1.ReferenceGrantTo{{Kind: "Secret", Name: new(gatewayv1.ObjectName("tls"))}})},
			from: referenceFrom{Group: gatewayv1.GroupName, Kind: "Gateway", Namespace: "infra"},
			to:   referenceTo{Kind: "Secret", Namespace: "certs", Name: "tls"},
			want: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := referencePermitted(grantListerOf(t, tt.grants...), tt.from, tt.to)
			if err != nil {
				t.Fatalf("referencePermitted: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("referencePermitted (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReferencePermittedListerError(t *testing.T) {
	boom := errors.New("cache broken")
	tests := []struct {
		name    string
		to      referenceTo
		want    bool
		wantErr error
	}{
		{name: "cross namespace asks the lister", to: referenceTo{Kind: "Service", Namespace: "backend", Name: "web"}, wantErr: boom},
		{name: "same namespace never asks", to: referenceTo{Kind: "Service", Namespace: "apps", Name: "web"}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := referencePermitted(failingGrantLister{err: boom},
				referenceFrom{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: "apps"}, tt.to)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("referencePermitted (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReferencePermittedNilLister(t *testing.T) {
	got, err := referencePermitted(nil,
		referenceFrom{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: "apps"},
		referenceTo{Kind: "Service", Namespace: "backend", Name: "web"})
	if err != nil {
		t.Fatalf("referencePermitted: %v", err)
	}
	if got {
		t.Error("referencePermitted with no ReferenceGrant lister = true, want false")
	}
}
