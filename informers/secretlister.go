package informers

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// cachedObjects returns every Secret the watches hold.
func (c *SecretCache) cachedObjects() []any {
	c.mu.Lock()
	defer c.mu.Unlock()
	var objs []any
	for _, w := range c.watches {
		if w.store != nil {
			objs = append(objs, w.store.List()...)
		}
	}
	return objs
}

// Cached returns the names of the Secrets the cache holds, in no order: those a
// listener names that exist and are of type kubernetes.io/tls.
func (c *SecretCache) Cached() []cache.ObjectName {
	objs := c.cachedObjects()
	names := make([]cache.ObjectName, 0, len(objs))
	for _, obj := range objs {
		if name, err := cache.ObjectToName(obj); err == nil {
			names = append(names, name)
		}
	}
	return names
}

// Lister returns the lister of the cached Secrets. Get answers ErrSecretNotSynced for
// a Secret a listener names whose watch has not listed yet, and NotFound for one that
// is missing, not of type kubernetes.io/tls, or named by no listener.
func (c *SecretCache) Lister() corelisters.SecretLister { return secretLister{c} }

// get returns the cached Secret key; see Lister. A Secret that referrers name but
// that is not watched is judged again first: the reader may have seen a grant or a
// class the handlers have not yet been told of.
func (c *SecretCache) get(key cache.ObjectName) (*corev1.Secret, error) {
	c.mu.Lock()
	w := c.watches[key]
	var newlyOver []cache.ObjectName
	if w == nil && c.named[key] > 0 {
		newlyOver = c.rejudgeNamingLocked(key)
		w = c.watches[key]
	}
	named, overCap, judging := c.named[key] > 0, c.overCapLocked(key), c.judging
	var store cache.Store
	var controller cache.Controller
	// A watch awaiting its release serves the Secret only if it is not over a cap.
	if w != nil && (w.refs > 0 || overCap == nil) {
		store, controller = w.store, w.controller
	}
	c.mu.Unlock()
	c.announceMissing(newlyOver)
	if !judging && (named || c.referenced(key)) {
		return nil, fmt.Errorf("references not judged yet: %w", ErrSecretNotSynced)
	}
	if store == nil && controller == nil {
		return nil, c.unwatchedError(key, named, overCap)
	}
	if controller == nil || !controller.HasSynced() {
		return nil, ErrSecretNotSynced
	}
	obj, exists, err := store.GetByKey(key.String())
	if err != nil {
		return nil, fmt.Errorf("read the store of the Secret's watch: %w", err)
	}
	if !exists {
		return nil, apierrors.NewNotFound(corev1.Resource("secret"), key.Name)
	}
	return obj.(*corev1.Secret), nil
}

// unwatchedError is get's answer for a Secret without a watch: over a namespace's cap;
// named but out of scope (another class, or not permitted), hence NotFound; not yet
// known to the referrer handlers though the indexes say it is named; or NotFound.
func (c *SecretCache) unwatchedError(key cache.ObjectName, named bool, overCap error) error {
	switch {
	case overCap != nil:
		return overCap
	case named:
		return apierrors.NewNotFound(corev1.Resource("secret"), key.Name)
	case c.referenced(key):
		return fmt.Errorf("no watch yet: %w", ErrSecretNotSynced)
	default:
		return apierrors.NewNotFound(corev1.Resource("secret"), key.Name)
	}
}

// list returns the cached Secrets of namespace ("" for all) that selector matches.
func (c *SecretCache) list(namespace string, selector labels.Selector) []*corev1.Secret {
	var out []*corev1.Secret
	for _, obj := range c.cachedObjects() {
		secret := obj.(*corev1.Secret)
		if (namespace == "" || secret.Namespace == namespace) && selector.Matches(labels.Set(secret.Labels)) {
			out = append(out, secret)
		}
	}
	return out
}

// secretLister is SecretCache.Lister.
type secretLister struct{ c *SecretCache }

func (l secretLister) List(selector labels.Selector) ([]*corev1.Secret, error) {
	return l.c.list("", selector), nil
}

func (l secretLister) Secrets(namespace string) corelisters.SecretNamespaceLister {
	return secretNamespaceLister{c: l.c, namespace: namespace}
}

type secretNamespaceLister struct {
	c         *SecretCache
	namespace string
}

func (l secretNamespaceLister) List(selector labels.Selector) ([]*corev1.Secret, error) {
	return l.c.list(l.namespace, selector), nil
}

func (l secretNamespaceLister) Get(name string) (*corev1.Secret, error) {
	return l.c.get(cache.ObjectName{Namespace: l.namespace, Name: name})
}
