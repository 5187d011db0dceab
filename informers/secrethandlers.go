package informers

import (
	"context"
	"slices"

	"k8s.io/client-go/tools/cache"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/metrics"
)

// waitInitialLists closes c.synced once initialListsDone holds. The references are
// judged again once the classes, Gateways and grants they are judged by have synced:
// a referrer handled before then may have been judged on incomplete listers.
func (c *SecretCache) waitInitialLists(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), append(c.referrersSyncedFuncs(), c.scope.synced...)...) {
		return
	}
	c.mu.Lock()
	c.judging = true
	c.mu.Unlock()
	c.rejudgeAll()
	if !cache.WaitForCacheSync(ctx.Done(), c.initialListsDone) {
		return
	}
	close(c.synced)
}

// referrersSyncedFuncs returns the HasSynced of the referrer handlers.
func (c *SecretCache) referrersSyncedFuncs() []cache.InformerSynced {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.referrersSynced)
}

// initialListsDone reports whether the referrer handlers have been handed their
// informers' initial lists and every watch has listed.
func (c *SecretCache) initialListsDone() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, synced := range c.referrersSynced {
		if !synced() {
			return false
		}
	}
	for _, w := range c.watches {
		if w.controller == nil || !w.controller.HasSynced() {
			return false
		}
	}
	return true
}

// HasSynced reports whether the Secrets named at start-up have been listed; see
// SecretCache. Once true, it stays true.
func (c *SecretCache) HasSynced() bool {
	select {
	case <-c.synced:
		return true
	default:
		return false
	}
}

// AddEventHandler registers handler for the events of every Secret watch. The Secrets
// already cached are handed to it first as adds; an event arriving meanwhile may reach
// it twice, which a handler that maps events to keys does not mind. Its registration
// has synced when the cache has.
func (c *SecretCache) AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	c.handlersMu.Lock()
	c.handlers = append(c.handlers, handler)
	c.handlersMu.Unlock()
	for _, obj := range c.cachedObjects() {
		handler.OnAdd(obj, true)
	}
	return secretRegistration{c}, nil
}

// eachHandler calls f with every registered handler. It takes only handlersMu: it runs
// on the watches' goroutines, which hold their queue's lock, while HasSynced checks
// under c.mu take that lock.
func (c *SecretCache) eachHandler(f func(cache.ResourceEventHandler)) {
	c.handlersMu.RLock()
	handlers := c.handlers
	c.handlersMu.RUnlock()
	for _, h := range handlers {
		f(h)
	}
}

// secretEvents is the handler of every Secret watch: it counts the Secrets cached and
// passes each event on to the registered handlers.
type secretEvents struct{ c *SecretCache }

func (e secretEvents) OnAdd(obj any, isInInitialList bool) {
	metrics.CachedSecrets.Inc()
	e.c.eachHandler(func(h cache.ResourceEventHandler) { h.OnAdd(obj, isInInitialList) })
}

func (e secretEvents) OnUpdate(oldObj, newObj any) {
	e.c.eachHandler(func(h cache.ResourceEventHandler) { h.OnUpdate(oldObj, newObj) })
}

func (e secretEvents) OnDelete(obj any) {
	metrics.CachedSecrets.Dec()
	e.c.eachHandler(func(h cache.ResourceEventHandler) { h.OnDelete(obj) })
}

// secretRegistration is an AddEventHandler registration: synced with the cache.
type secretRegistration struct{ c *SecretCache }

func (r secretRegistration) HasSynced() bool { return r.c.HasSynced() }

func (r secretRegistration) HasSyncedChecker() cache.DoneChecker { return syncedChecker{r.c.synced} }

type syncedChecker struct{ done chan struct{} }

func (s syncedChecker) Name() string { return "Secret watches" }

func (s syncedChecker) Done() <-chan struct{} { return s.done }
