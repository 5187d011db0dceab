package identity

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
)

// Input is what a Gateway's identity is computed from.
type Input struct {
	Gateway cache.ObjectName
	// Service is the Consul service the Gateway's pods are instances of: the name of
	// its api-gateway entry.
	Service string
	// ServiceAccount is the name of the gateway pods' ServiceAccount, in the
	// Gateway's namespace.
	ServiceAccount string
	// ServiceAccountUID is the UID of that ServiceAccount as the controller created
	// it: a ServiceAccount deleted and made again under the name by someone else has
	// another, and its tokens get no role.
	ServiceAccountUID types.UID
	// AuthMethod is the Kubernetes auth method the pods log in to.
	AuthMethod string
}

// Identity is a Gateway's ACL objects as this controller writes them.
type Identity struct {
	Gateway cache.ObjectName
	// Name is the name of both the policy and the role.
	Name        string
	Description string
	Rules       string
	BindingRule consulapi.ACLBindingRule
}

// Namer names and marks the ACL objects of one controller instance.
type Namer struct {
	// Prefix starts every name, as it starts every entry name.
	Prefix    string
	Ownership translate.Ownership
}

// maxNameLength is the longest policy name Consul accepts (roles may be longer).
const maxNameLength = 128

// Name is the name of a Gateway's policy and role: readable, and unique per cluster,
// namespace and Gateway. Consul allows only letters, digits, '-' and '_' there, so
// other characters become '-', and a hash of the cluster id and the Gateway's full
// name tells apart the names that this, or a cut to 128 characters, would merge.
func (n Namer) Name(gateway cache.ObjectName) string {
	sum := sha256.Sum256([]byte(n.Ownership.ClusterID + "\x00" + gateway.Namespace + "\x00" + gateway.Name))
	suffix := "-" + hex.EncodeToString(sum[:])[:10]
	readable := aclName(n.Prefix + "gateway-" + gateway.Namespace + "-" + gateway.Name)
	if len(readable) > maxNameLength-len(suffix) {
		readable = readable[:maxNameLength-len(suffix)]
	}
	return readable + suffix
}

func aclName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		default:
			return '-'
		}
	}, s)
}

// Description marks an object as this controller's, for one Gateway. ACL policies,
// roles and binding rules have no meta, so ownership lives here.
func (n Namer) Description(gateway cache.ObjectName) string {
	return descriptionPrefix + gateway.String() + n.descriptionSuffix()
}

const descriptionPrefix = "Identity of Gateway "

func (n Namer) descriptionSuffix() string {
	return fmt.Sprintf(", managed by %s in cluster %s", n.Ownership.Controller, n.Ownership.ClusterID)
}

// OwnerOf returns the Gateway an object's description says it serves, when this
// controller instance wrote it.
func (n Namer) OwnerOf(description string) (cache.ObjectName, bool) {
	rest, ok := strings.CutPrefix(description, descriptionPrefix)
	if !ok {
		return cache.ObjectName{}, false
	}
	key, ok := strings.CutSuffix(rest, n.descriptionSuffix())
	if !ok {
		return cache.ObjectName{}, false
	}
	namespace, name, ok := strings.Cut(key, "/")
	if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
		return cache.ObjectName{}, false
	}
	return cache.ObjectName{Namespace: namespace, Name: name}, true
}

// Desired is the identity of one Gateway. It is pure.
func (n Namer) Desired(in Input) Identity {
	name := n.Name(in.Gateway)
	description := n.Description(in.Gateway)
	return Identity{
		Gateway:     in.Gateway,
		Name:        name,
		Description: description,
		Rules:       policyRules(in.Gateway, in.Service),
		BindingRule: consulapi.ACLBindingRule{
			Description: description,
			AuthMethod:  in.AuthMethod,
			Selector:    bindingSelector(in.Gateway.Namespace, in.ServiceAccount, in.ServiceAccountUID),
			BindType:    consulapi.BindingRuleBindTypeRole,
			BindName:    name,
		},
	}
}

// bindingSelector selects the logins of one ServiceAccount: Consul's Kubernetes auth method
// takes the UID from the TokenReview of the login's token, so it is the object's, not
// only its name's.
func bindingSelector(namespace, serviceAccount string, uid types.UID) string {
	return fmt.Sprintf("serviceaccount.namespace==%q and serviceaccount.name==%q and serviceaccount.uid==%q", namespace, serviceAccount, uid)
}

// policyRules is the policy of a Gateway's pods. Write on the Gateway's own service is what
// lets a proxy receive that service's configuration and register as it; nothing else
// is writable. The reads are what Consul 1.15 checks while it builds an api-gateway
// proxy's configuration: mesh read for the route and inline-certificate entries, service
// read for the discovery chains of the backends and node read for their endpoints.
// Consul has no narrower grant for those entries: mesh read also lets the token read
// other gateways' routes and certificate entries.
func policyRules(gateway cache.ObjectName, service string) string {
	return fmt.Sprintf(`# Gateway %s: its pods act as its Consul service and nothing else.
service %q {
  policy = "write"
}
# What Consul reads with the proxy's token to build its configuration: the route and
# certificate entries (mesh), the backends' discovery chains (service) and endpoints
# (node).
mesh = "read"
service_prefix "" {
  policy = "read"
}
node_prefix "" {
  policy = "read"
}
`, gateway, service)
}
