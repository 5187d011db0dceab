package sync

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/labels"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewaylisters "sigs.k8s.io/gateway-api/pkg/client/listers/apis/v1"
)

// referenceFrom is the object that holds a reference. Group is "" for the core API
// group, as everywhere in Gateway API.
type referenceFrom struct{ Group, Kind, Namespace string }

// referenceTo is the object referred to (in to.Namespace). Group is "" for the core API
// group.
type referenceTo struct{ Group, Kind, Namespace, Name string }

// referencePermitted reports whether from may refer to to: always when the namespaces
// are equal, otherwise only when a ReferenceGrant in to.Namespace has a From entry
// matching from (group, kind, namespace) and a To entry matching to (group, kind, and
// name when the entry sets one).
//
// Groups are compared exactly: the spec defines only "" as the core group (Group type
// and ReferenceGrantFrom/To.Group: "When empty, the Kubernetes core API group is
// inferred"), so a grant spelling it "core" grants nothing for core kinds.
//
// A nil lister means ReferenceGrants are not watched (for example the CRD is absent):
// then no cross-namespace reference is permitted, which is what the spec requires
// without a grant.
func referencePermitted(grants gatewaylisters.ReferenceGrantLister, from referenceFrom, to referenceTo) (bool, error) {
	if from.Namespace == to.Namespace {
		return true, nil
	}
	if grants == nil {
		return false, nil
	}
	// Only grants in the referent's namespace count: the owner of that namespace is the
	// one who has to consent.
	list, err := grants.ReferenceGrants(to.Namespace).List(labels.Everything())
	if err != nil {
		return false, fmt.Errorf("list ReferenceGrants in namespace %s: %w", to.Namespace, err)
	}
	return slices.ContainsFunc(list, func(g *gatewayv1.ReferenceGrant) bool {
		return grantPermits(g.Spec, from, to)
	}), nil
}

// grantPermits reports whether one grant covers the reference. From and To entries are
// each ORed, and both sides must match within the same grant: a From in one grant and
// a To in another do not combine.
func grantPermits(spec gatewayv1.ReferenceGrantSpec, from referenceFrom, to referenceTo) bool {
	fromOK := slices.ContainsFunc(spec.From, func(f gatewayv1.ReferenceGrantFrom) bool {
		return grantFromMatches(f, from)
	})
	if !fromOK {
		return false
	}
	return slices.ContainsFunc(spec.To, func(t gatewayv1.ReferenceGrantTo) bool {
		return grantToMatches(t, to)
	})
}

// grantFromMatches compares all three fields: each is required in ReferenceGrantFrom.
func grantFromMatches(f gatewayv1.ReferenceGrantFrom, from referenceFrom) bool {
	return string(f.Group) == from.Group &&
		string(f.Kind) == from.Kind &&
		string(f.Namespace) == from.Namespace
}

// grantToMatches treats only a missing name as "every object of the kind". An empty
// name cannot pass validation (ObjectName has MinLength 1); treating it as a wildcard
// would widen access on malformed input, so it matches nothing.
func grantToMatches(t gatewayv1.ReferenceGrantTo, to referenceTo) bool {
	if string(t.Group) != to.Group || string(t.Kind) != to.Kind {
		return false
	}
	return t.Name == nil || string(*t.Name) == to.Name
}
