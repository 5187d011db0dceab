package informers

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/metrics"
)

// DefaultSecretsPerNamespace is how many distinct Secrets the listeners of one
// namespace's Gateways and ListenerSets may have watched, unless WithSecretsPerNamespace
// says otherwise.
const DefaultSecretsPerNamespace = 100

// SecretOverCapError is what the SecretCache's lister answers for a Secret that
// permitted listeners of the controller's classes name but that is not watched: the
// listeners of Namespace already name Cap other Secrets, admitted before it.
type SecretOverCapError struct {
	Namespace string
	Cap       int
}

func (e *SecretOverCapError) Error() string {
	return fmt.Sprintf("the listeners of namespace %s name more than %d Secrets, the controller's limit per namespace", e.Namespace, e.Cap)
}

// WithControllerName has the Secret cache watch only the Secrets named by listeners
// of Gateways whose GatewayClass has controllerName name, and of ListenerSets
// attached to such Gateways. Without it every class counts.
func WithControllerName(name gatewayv1.GatewayController) Option {
	return func(i *Informers, _ time.Duration) { i.controllerName = name }
}

// WithSecretsPerNamespace sets the cap on the Secrets watched for one namespace's
// listeners (DefaultSecretsPerNamespace when not given).
func WithSecretsPerNamespace(n int) Option {
	return func(i *Informers, _ time.Duration) { i.secretsPerNamespace = n }
}

// secretScope decides which references open watches. Its functions read listers.
type secretScope struct {
	// ours reports whether the Gateway is of a class of this controller.
	ours func(gateway cache.ObjectName) bool
	// permitted reports whether a referrer of kind in namespace may name secret: the
	// same namespace, or a ReferenceGrant in the Secret's namespace allows it.
	permitted func(kind, namespace string, secret cache.ObjectName) bool
	// perNamespace caps the distinct Secrets watched for one namespace's referrers.
	perNamespace int
	// synced reports whether the listers the functions read have synced.
	synced []cache.InformerSynced
}

// secretScope builds the scope from the informers' listers.
func (i *Informers) secretScope() secretScope {
	perNamespace := i.secretsPerNamespace
	if perNamespace <= 0 {
		perNamespace = DefaultSecretsPerNamespace
	}
	return secretScope{
		ours:         i.gatewayOfOurClass,
		permitted:    i.certificatePermitted,
		perNamespace: perNamespace,
		synced: []cache.InformerSynced{
			i.GatewayClasses.Informer().HasSynced, i.Gateways.Informer().HasSynced, i.ReferenceGrants.Informer().HasSynced,
		},
	}
}

// gatewayOfOurClass reports whether the cached Gateway key is of a GatewayClass whose
// controllerName is this controller's (any class without WithControllerName).
func (i *Informers) gatewayOfOurClass(key cache.ObjectName) bool {
	gw, err := i.Gateways.Lister().Gateways(key.Namespace).Get(key.Name)
	if err != nil {
		return false
	}
	if i.controllerName == "" {
		return true
	}
	class, err := i.GatewayClasses.Lister().Get(string(gw.Spec.GatewayClassName))
	return err == nil && class.Spec.ControllerName == i.controllerName
}

// certificatePermitted reports whether a Gateway or ListenerSet (kind) of namespace may
// use secret as a certificate: in its own namespace always, in another only when a
// ReferenceGrant there allows it, as the status pipeline judges (sync/refgrant.go).
func (i *Informers) certificatePermitted(kind, namespace string, secret cache.ObjectName) bool {
	if namespace == secret.Namespace {
		return true
	}
	grants, err := i.ReferenceGrants.Lister().ReferenceGrants(secret.Namespace).List(labels.Everything())
	if err != nil {
		return false
	}
	return slices.ContainsFunc(grants, func(g *gatewayv1.ReferenceGrant) bool {
		return grantsCertificate(g.Spec, kind, namespace, secret.Name)
	})
}

// grantsCertificate reports whether one grant lets a kind of namespace name the Secret
// name: a From and a To entry of the same grant must match.
func grantsCertificate(spec gatewayv1.ReferenceGrantSpec, kind, namespace, name string) bool {
	from := slices.ContainsFunc(spec.From, func(f gatewayv1.ReferenceGrantFrom) bool {
		return string(f.Group) == gatewayv1.GroupName && string(f.Kind) == kind && string(f.Namespace) == namespace
	})
	return from && slices.ContainsFunc(spec.To, func(t gatewayv1.ReferenceGrantTo) bool {
		return string(t.Group) == gatewayapi.CoreGroup && string(t.Kind) == gatewayapi.SecretKind &&
			(t.Name == nil || string(*t.Name) == name)
	})
}

// referrerRecord is what the cache holds of a Gateway or ListenerSet naming Secrets.
type referrerRecord struct {
	// created orders the referrers of a namespace for the cap: the oldest first.
	created time.Time
	// gateway is the Gateway whose class decides: the Gateway itself, or a
	// ListenerSet's parent; zero for a ListenerSet without one.
	gateway cache.ObjectName
	// secrets are the Secrets it names, in listener order, each once.
	secrets []cache.ObjectName
}

// compareReferrers orders the referrers of a namespace for the cap: the oldest first,
// then Gateways before ListenerSets, then by name, so the same objects always admit
// the same Secrets.
func compareReferrers(a, b secretReferrer, ra, rb referrerRecord) int {
	if c := ra.created.Compare(rb.created); c != 0 {
		return c
	}
	if a.kind != b.kind {
		if a.kind == gatewayapi.GatewayKind {
			return -1
		}
		return 1
	}
	return cmp.Compare(a.name.Name, b.name.Name)
}

// admittedIn returns the Secrets namespace's referrers have watched, in order, and
// those over the cap: only the referrers whose Gateway is of our class, and only the
// references they are permitted.
func (c *SecretCache) admittedIn(namespace string) (admitted, over []cache.ObjectName) {
	var referrers []secretReferrer
	for r := range c.referrers {
		if r.name.Namespace == namespace {
			referrers = append(referrers, r)
		}
	}
	slices.SortFunc(referrers, func(a, b secretReferrer) int { return compareReferrers(a, b, c.referrers[a], c.referrers[b]) })
	seen := map[cache.ObjectName]bool{}
	for _, r := range referrers {
		record := c.referrers[r]
		if record.gateway == (cache.ObjectName{}) || !c.scope.ours(record.gateway) {
			continue
		}
		for _, secret := range record.secrets {
			if seen[secret] || !c.scope.permitted(r.kind, namespace, secret) {
				continue
			}
			seen[secret] = true
			if len(admitted) < c.scope.perNamespace {
				admitted = append(admitted, secret)
				continue
			}
			over = append(over, secret)
		}
	}
	return admitted, over
}

// rejudgeLocked recomputes what namespace's referrers have watched: a Secret newly
// admitted is acquired, one no longer admitted released. It returns the Secrets newly
// over the cap, whose referrers must be judged again. Callers hold c.mu.
func (c *SecretCache) rejudgeLocked(namespace string) (newlyOver []cache.ObjectName) {
	if !c.judging {
		return nil
	}
	admitted, over := c.admittedIn(namespace)
	previous := c.admitted[namespace]
	// Both are at most the cap long.
	for _, key := range admitted {
		if !slices.Contains(previous, key) {
			c.acquireLocked(key)
		}
	}
	for _, key := range previous {
		if !slices.Contains(admitted, key) {
			c.releaseLocked(key)
		}
	}
	previousOver := c.overCap[namespace]
	for _, key := range over {
		if !previousOver[key] {
			newlyOver = append(newlyOver, key)
		}
	}
	if len(over) > 0 && len(newlyOver) > 0 {
		c.logger.V(2).Info("Listener certificate references over the namespace's cap: not watched", "namespace", namespace,
			"cap", c.scope.perNamespace, "over", len(over))
	}
	c.setOrDelete(namespace, admitted, over)
	return newlyOver
}

// setOrDelete records namespace's admitted and over-cap Secrets.
func (c *SecretCache) setOrDelete(namespace string, admitted, over []cache.ObjectName) {
	metrics.SecretsOverCap.Add(float64(len(over) - len(c.overCap[namespace])))
	if len(admitted) == 0 {
		delete(c.admitted, namespace)
	} else {
		c.admitted[namespace] = admitted
	}
	if len(over) == 0 {
		delete(c.overCap, namespace)
		return
	}
	set := make(map[cache.ObjectName]bool, len(over))
	for _, key := range over {
		set[key] = true
	}
	c.overCap[namespace] = set
}

// rejudgeAll recomputes every namespace's watches: a GatewayClass or ReferenceGrant
// changed, which may change any.
func (c *SecretCache) rejudgeAll() {
	c.mu.Lock()
	namespaces := map[string]bool{}
	for r := range c.referrers {
		namespaces[r.name.Namespace] = true
	}
	for ns := range c.admitted {
		namespaces[ns] = true
	}
	for ns := range c.overCap {
		namespaces[ns] = true
	}
	var newlyOver []cache.ObjectName
	for ns := range namespaces {
		newlyOver = append(newlyOver, c.rejudgeLocked(ns)...)
	}
	c.mu.Unlock()
	c.announceMissing(newlyOver)
}

// rejudgeAttachedLocked recomputes the namespaces of the ListenerSets attached to
// gateway, whose class decides for them. Callers hold c.mu.
func (c *SecretCache) rejudgeAttachedLocked(gateway cache.ObjectName) (newlyOver []cache.ObjectName) {
	namespaces := map[string]bool{}
	for r, record := range c.referrers {
		if r.kind == gatewayapi.ListenerSetKind && record.gateway == gateway {
			namespaces[r.name.Namespace] = true
		}
	}
	for ns := range namespaces {
		newlyOver = append(newlyOver, c.rejudgeLocked(ns)...)
	}
	return newlyOver
}

// overCapLocked returns the error of a Secret over the cap of some namespace, nil when
// it is over none. Callers hold c.mu.
func (c *SecretCache) overCapLocked(key cache.ObjectName) error {
	namespaces := make([]string, 0, len(c.overCap))
	for ns, over := range c.overCap {
		if over[key] {
			namespaces = append(namespaces, ns)
		}
	}
	if len(namespaces) == 0 {
		return nil
	}
	slices.Sort(namespaces)
	return &SecretOverCapError{Namespace: namespaces[0], Cap: c.scope.perNamespace}
}

// announceMissing tells the handlers that keys are gone from the cache's view, as a
// deletion tombstone, so the listeners naming them are judged again.
func (c *SecretCache) announceMissing(keys []cache.ObjectName) {
	for _, key := range keys {
		c.logger.V(4).Info("Secret not watched: over its namespace's cap", "secret", klog.KRef(key.Namespace, key.Name))
		c.eachHandler(func(h cache.ResourceEventHandler) { h.OnDelete(cache.DeletedFinalStateUnknown{Key: key.String()}) })
	}
}
