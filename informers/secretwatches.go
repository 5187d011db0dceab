package informers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/metrics"
)

// acquireLocked counts one more referrer of key, and watches it if it is the first.
// Callers hold c.mu.
func (c *SecretCache) acquireLocked(key cache.ObjectName) {
	w, ok := c.watches[key]
	if !ok {
		w = &secretWatch{key: key}
		c.watches[key] = w
		c.runLocked(w)
	}
	w.refs++
	if w.release != nil {
		w.release.Stop()
		w.release = nil
		c.logger.V(4).Info("Secret named again before its release", "secret", klog.KRef(key.Namespace, key.Name))
	}
}

// releaseLocked counts one referrer of key less; the last one leaving schedules the
// end of its watch after releaseDelay. Callers hold c.mu.
func (c *SecretCache) releaseLocked(key cache.ObjectName) {
	w, ok := c.watches[key]
	if !ok {
		return
	}
	w.refs--
	if w.refs > 0 {
		return
	}
	if c.releaseDelay <= 0 {
		c.stopLocked(w)
		return
	}
	w.release = c.clock.AfterFunc(c.releaseDelay, func() { c.expire(w) })
}

// expire stops w if nothing named its Secret again since its release was scheduled.
func (c *SecretCache) expire(w *secretWatch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watches[w.key] != w || w.refs > 0 {
		return
	}
	c.stopLocked(w)
}

// stopLocked ends w's watch and forgets the Secret. Callers hold c.mu.
func (c *SecretCache) stopLocked(w *secretWatch) {
	delete(c.watches, w.key)
	if w.cancel != nil {
		w.cancel()
	}
	c.logger.V(2).Info("Stopped watching Secret: no listener names it", "secret", klog.KRef(w.key.Namespace, w.key.Name))
}

// runLocked starts w's watch, unless the cache has not started (Start runs it then)
// or has stopped. Callers hold c.mu.
func (c *SecretCache) runLocked(w *secretWatch) {
	if c.ctx == nil || c.ctx.Err() != nil || w.controller != nil {
		return
	}
	logger := c.logger.WithValues("secret", klog.KRef(w.key.Namespace, w.key.Name))
	w.store, w.controller = cache.NewInformerWithOptions(cache.InformerOptions{
		Logger:          &logger,
		ListerWatcher:   c.listWatch(w.key),
		ObjectType:      &corev1.Secret{},
		Handler:         secretEvents{c},
		ResyncPeriod:    c.resync,
		MinWatchTimeout: secretMinWatchTimeout,
		Transform:       trimSecret,
	})
	ctx, cancel := context.WithCancel(klog.NewContext(c.ctx, logger))
	w.cancel = cancel
	store, controller := w.store, w.controller
	metrics.SecretWatches.Inc()
	c.running.Go(func() {
		controller.RunWithContext(ctx)
		// Nothing reaches the handlers any more: what the store holds leaves the count.
		metrics.CachedSecrets.Sub(float64(len(store.ListKeys())))
		metrics.SecretWatches.Dec()
	})
	c.running.Go(func() { c.announceListed(ctx, w.key, store, controller) })
	logger.V(2).Info("Watching Secret: a listener names it")
}

// listWatch lists and watches the Secret key alone, and only if it is of type
// kubernetes.io/tls.
func (c *SecretCache) listWatch(key cache.ObjectName) cache.ListerWatcher {
	selector := fields.AndSelectors(fields.OneTermEqualSelector("metadata.name", key.Name), tlsSecretSelector).String()
	secrets := c.client.CoreV1().Secrets(key.Namespace)
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
			options.FieldSelector = selector
			return secrets.List(ctx, options)
		},
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			options.FieldSelector = selector
			return secrets.Watch(ctx, options)
		},
	}, c.client)
}

// announceListed tells the handlers, once the watch has listed, what it found, as a
// resync would: the Secret as an update when it exists, and a deletion tombstone of its
// key when it does not. The referrers' syncs that met ErrSecretNotSynced in the
// meantime are thereby enqueued again at once.
func (c *SecretCache) announceListed(ctx context.Context, key cache.ObjectName, store cache.Store, controller cache.Controller) {
	select {
	case <-controller.HasSyncedChecker().Done():
	case <-ctx.Done():
		return
	}
	obj, exists, err := store.GetByKey(key.String())
	if err == nil && exists {
		c.eachHandler(func(h cache.ResourceEventHandler) { h.OnUpdate(obj, obj) })
		return
	}
	c.eachHandler(func(h cache.ResourceEventHandler) { h.OnDelete(cache.DeletedFinalStateUnknown{Key: key.String()}) })
}
