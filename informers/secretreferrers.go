package informers

import (
	"fmt"
	"slices"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
)

// trackReferrers registers on informer, of objects of kind, the handler that keeps the
// Secrets each object names (recordOf) watched. Call it before Start.
func (c *SecretCache) trackReferrers(kind string, informer cache.SharedIndexInformer, recordOf func(obj any) referrerRecord) error {
	registration, err := informer.AddEventHandler(c.referrerHandler(kind, recordOf))
	if err != nil {
		return fmt.Errorf("track %s certificate references: %w", kind, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.referrersSynced = append(c.referrersSynced, registration.HasSynced)
	return nil
}

// trackScope registers on informer (GatewayClasses, ReferenceGrants) a handler that
// judges every reference again on any change: a class or a grant may change any.
func (c *SecretCache) trackScope(what string, informer cache.SharedIndexInformer) error {
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.rejudgeAll() },
		UpdateFunc: func(any, any) { c.rejudgeAll() },
		DeleteFunc: func(any) { c.rejudgeAll() },
	})
	if err != nil {
		return fmt.Errorf("follow %s for certificate references: %w", what, err)
	}
	return nil
}

// referrerHandler is the handler trackReferrers registers.
func (c *SecretCache) referrerHandler(kind string, recordOf func(obj any) referrerRecord) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.referrerChanged(kind, obj, recordOf(obj)) },
		UpdateFunc: func(_, newObj any) { c.referrerChanged(kind, newObj, recordOf(newObj)) },
		DeleteFunc: func(obj any) { c.referrerChanged(kind, obj, referrerRecord{}) },
	}
}

// referrerChanged records that the Gateway or ListenerSet obj now names secrets. A
// deletion tombstone's key serves when the object is unknown: what it named is
// recorded.
func (c *SecretCache) referrerChanged(kind string, obj any, record referrerRecord) {
	name, err := cache.DeletionHandlingObjectToName(obj)
	if err != nil {
		c.logger.Error(err, "Certificate references not tracked", "kind", kind, "type", fmt.Sprintf("%T", obj))
		return
	}
	c.setReferences(secretReferrer{kind: kind, name: name}, record)
}

// setReferences records that r names record.secrets, and judges again which Secrets
// r's namespace has watched, and, for a Gateway, those of the ListenerSets attached
// to it.
func (c *SecretCache) setReferences(r secretReferrer, record referrerRecord) {
	c.mu.Lock()
	previous := c.referrers[r].secrets
	for _, key := range record.secrets {
		c.named[key]++
	}
	for _, key := range previous {
		if c.named[key]--; c.named[key] <= 0 {
			delete(c.named, key)
		}
	}
	if len(record.secrets) == 0 {
		delete(c.referrers, r)
	} else {
		record.secrets = slices.Clone(record.secrets)
		c.referrers[r] = record
	}
	newlyOver := c.rejudgeLocked(r.name.Namespace)
	if r.kind == gatewayapi.GatewayKind {
		newlyOver = append(newlyOver, c.rejudgeAttachedLocked(r.name)...)
	}
	if !slices.Equal(previous, record.secrets) {
		c.logger.V(4).Info("Listener certificate references changed", "kind", r.kind, "object", klog.KRef(r.name.Namespace, r.name.Name),
			"named", len(record.secrets), "watches", len(c.watches))
	}
	c.mu.Unlock()
	c.announceMissing(newlyOver)
}

// rejudgeNamingLocked judges again the namespaces whose referrers name key. Callers
// hold c.mu.
func (c *SecretCache) rejudgeNamingLocked(key cache.ObjectName) (newlyOver []cache.ObjectName) {
	namespaces := map[string]bool{}
	for r, record := range c.referrers {
		if slices.Contains(record.secrets, key) {
			namespaces[r.name.Namespace] = true
		}
	}
	for ns := range namespaces {
		newlyOver = append(newlyOver, c.rejudgeLocked(ns)...)
	}
	return newlyOver
}
