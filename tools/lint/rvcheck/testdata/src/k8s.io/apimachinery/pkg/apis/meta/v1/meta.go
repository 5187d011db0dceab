// Package v1 is a tiny stand-in for k8s.io/apimachinery/pkg/apis/meta/v1:
// just the fields and accessor rvcheck keys on.
package v1

type ObjectMeta struct {
	Name            string
	Namespace       string
	ResourceVersion string
	Generation      int64
}

func (m *ObjectMeta) GetResourceVersion() string { return m.ResourceVersion }

type ListMeta struct {
	ResourceVersion string
}

func (m *ListMeta) GetResourceVersion() string { return m.ResourceVersion }

type ResourceVersionMatch string

const ResourceVersionMatchNotOlderThan ResourceVersionMatch = "NotOlderThan"

type ListOptions struct {
	ResourceVersion      string
	ResourceVersionMatch ResourceVersionMatch
}

type GetOptions struct {
	ResourceVersion string
}

type Preconditions struct {
	ResourceVersion *string
}

// Object mirrors the metav1.Object accessor interface.
type Object interface {
	GetResourceVersion() string
}

type Gateway struct {
	ObjectMeta
}
