package informers

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// A standby's Secret watches lag the API server as its other caches do (caughtup.go):
// a watch whose request expired relists with backoff, and meanwhile holds the Secret as
// it was. A new leader translating from it writes the older certificate over the newer
// one the previous leader wrote. So a new leader also waits for the Secret watches.

// WaitCaughtUp returns once each Secret watch that had listed holds what a consistent
// list of its namespace's kubernetes.io/tls Secrets, read after the call began, held:
// the listed version of its Secret (or one delivered since), or no Secret when the list
// has none. A watch that has not listed needs no wait: its Secret reads as not synced,
// never as an older version. One metadata list per namespace with watched Secrets; a
// list that fails is retried until ctx is done, and the error is then ctx's.
func (c *SecretCache) WaitCaughtUp(ctx context.Context, client metadata.Interface) error {
	logger := klog.FromContext(ctx).WithValues("resource", "secrets")
	seen := newDeliveredVersions()
	defer c.addCatchUpHandler(seen.handler())()

	backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Cap: 5 * time.Second, Steps: 1 << 30}
	for lists := 1; ; lists++ {
		watches := c.listedWatches()
		if len(watches) == 0 {
			return nil
		}
		want, err := listTLSSecretVersions(ctx, client, watches)
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			logger.V(2).Info("Listing to check the Secret watches failed; retrying", "err", err)
			sleepCtx(ctx, backoff.Step())
			continue
		}
		err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, relistAfter, true, func(context.Context) (bool, error) {
			return seen.secretsCaughtUp(want, watches), nil
		})
		if err == nil {
			logger.V(4).Info("Secret watches caught up with the API server", "secrets", len(watches), "lists", lists)
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		logger.V(2).Info("A Secret watch is behind the API server; listing again", "secrets", len(watches), "lists", lists)
	}
}

// listedWatches returns the store of each watch that has listed, by Secret.
func (c *SecretCache) listedWatches() map[cache.ObjectName]cache.Store {
	c.mu.Lock()
	defer c.mu.Unlock()
	stores := map[cache.ObjectName]cache.Store{}
	for key, w := range c.watches {
		if w.controller != nil && w.controller.HasSynced() {
			stores[key] = w.store
		}
	}
	return stores
}

// addCatchUpHandler registers handler for the Secret watches' events from now on,
// without the adds of what is cached, and returns its removal.
func (c *SecretCache) addCatchUpHandler(handler cache.ResourceEventHandler) (remove func()) {
	// A pointer, so that the removal finds this registration by identity.
	registered := &struct{ cache.ResourceEventHandler }{handler}
	c.handlersMu.Lock()
	c.handlers = append(slices.Clip(c.handlers), registered)
	c.handlersMu.Unlock()
	return func() {
		c.handlersMu.Lock()
		defer c.handlersMu.Unlock()
		// A new slice: eachHandler may be ranging over the old one without the lock.
		c.handlers = slices.DeleteFunc(slices.Clone(c.handlers), func(h cache.ResourceEventHandler) bool {
			p, ok := h.(*struct{ cache.ResourceEventHandler })
			return ok && p == registered
		})
	}
}

// listTLSSecretVersions lists the metadata of the kubernetes.io/tls Secrets of each
// namespace of watches, as a quorum read, and returns their versions by key.
func listTLSSecretVersions(ctx context.Context, client metadata.Interface, watches map[cache.ObjectName]cache.Store) (map[string]string, error) {
	namespaces := map[string]bool{}
	for key := range watches {
		namespaces[key.Namespace] = true
	}
	secrets := corev1.SchemeGroupVersion.WithResource("secrets")
	versions := map[string]string{}
	for namespace := range namespaces {
		// ResourceVersion "": the API server's state now, not a watch cache's.
		list, err := client.Resource(secrets).Namespace(namespace).List(ctx, metav1.ListOptions{FieldSelector: tlsSecretSelector.String()})
		if err != nil {
			return nil, fmt.Errorf("list the Secrets of namespace %s: %w", namespace, err)
		}
		for i := range list.Items {
			key, _ := cache.MetaNamespaceKeyFunc(&list.Items[i])
			versions[key] = list.Items[i].ResourceVersion
		}
	}
	return versions, nil
}

// secretsCaughtUp reports whether each watch's store has reached want: its Secret was
// delivered at the listed version (or is cached at it), or, unlisted, is not cached.
// Versions are compared for equality only.
func (d *deliveredVersions) secretsCaughtUp(want map[string]string, watches map[cache.ObjectName]cache.Store) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, store := range watches {
		key := name.String()
		obj, exists, err := store.GetByKey(key)
		if err != nil {
			return false
		}
		version, listed := want[key]
		if !listed {
			if exists {
				return false
			}
			continue
		}
		if d.versions[key][version] {
			continue
		}
		if !exists || resourceVersion(obj) != version {
			return false
		}
	}
	return true
}

func resourceVersion(obj any) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return m.GetResourceVersion()
}
