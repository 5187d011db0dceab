package informers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/metrics"
)

// ErrSecretNotSynced is what the SecretCache's lister answers for a Secret a listener
// names whose watch has not listed yet: the Secret may exist, so it is not NotFound.
var ErrSecretNotSynced = errors.New("the Secret's watch has not listed yet")

const (
	// secretReleaseDelay is how long a Secret stays watched and cached after the last
	// listener naming it went. The Consul syncer translates the last confirmed version
	// of a Gateway until the status pipeline confirms the new one; in that window the
	// old version's certificate must still be readable, or its listener would leave
	// Consul for a moment when a certificateRef changes. The same delay spares a watch
	// restart when a reference is dropped and added back.
	secretReleaseDelay = 10 * time.Second

	// secretMinWatchTimeout is the shortest timeout of a Secret's watch requests. One
	// watch per referenced Secret would otherwise be re-established every 5 to 10
	// minutes each; the kubelet's watch-based Secret manager raises it the same way.
	secretMinWatchTimeout = 30 * time.Minute
)

// SecretCache caches the kubernetes.io/tls Secrets that a Gateway or ListenerSet
// listener names as a certificate, and nothing else: a Secret nobody refers to costs
// the controller nothing, however large, and however many there are. It is modelled
// on the kubelet's watch-based Secret manager: each referenced Secret has a watch of
// its own (an informer whose list and watch carry the field selectors metadata.name
// and type=kubernetes.io/tls, in the Secret's namespace), counted by the referrers
// naming it, started when the first appears and stopped when the last has gone for
// secretReleaseDelay. The references come from the Gateway and ListenerSet informers'
// events (trackReferrers), never from extra API reads.
//
// Readers get a corelisters.SecretLister (Lister) and event handlers
// (AddEventHandler) as from a Secret informer, so they map the same keys.
//
// Sync: HasSynced is true once the referrer handlers have been handed the Gateway and
// ListenerSet informers' initial lists and every watch those started has listed; it
// stays true from then on, so /readyz does not flap when a new Gateway names a new
// Secret. So at start-up no status is judged before the Secrets that existed are in
// the cache. A Secret named later is judged missing only once its watch has listed:
// until then the lister answers ErrSecretNotSynced (never NotFound), which the status
// pipeline treats as "try again later", and when the watch lists, the handlers are
// told, as by a resync (an update when the Secret exists, a deletion tombstone when it
// does not), so the referrers are judged again at once rather than after a backoff.
//
// Scope (secretscope.go): a reference opens a watch only when its Gateway (a
// ListenerSet's parent) is of a class of this controller and it is permitted (same
// namespace, or a ReferenceGrant), and at most a cap of distinct Secrets per referrer
// namespace, the oldest referrers first; the lister answers SecretOverCapError past
// it, and NotFound for a Secret named only out of scope. The watches' transform keeps
// only tls.crt and tls.key, and neither of a Secret larger than MaxCertificateBytes
// (SecretRefusal).
//
// Cost: each watched Secret is one watch on the API server and a few goroutines here,
// and, against an API server without WatchList, one LIST through the client's rate
// limiter (WithSecretClient: a budget of its own) when its watch starts. A class or
// grant change judges every reference again, from the listers.
type SecretCache struct {
	client       kubernetes.Interface
	resync       time.Duration
	clock        clock.WithDelayedExecution
	releaseDelay time.Duration
	// referenced reports whether a cached Gateway or ListenerSet names a Secret. It reads
	// the certificate indexes, which change together with the listers, whereas the
	// referrer handlers run a little later: a Secret referenced but not yet watched is
	// not yet synced, not missing.
	referenced func(cache.ObjectName) bool
	// scope decides which references open watches.
	scope secretScope

	mu sync.Mutex
	// ctx is what watches run with; nil until Start.
	ctx    context.Context
	logger klog.Logger
	// referrers holds the Secrets each Gateway and ListenerSet names, as last seen.
	referrers map[secretReferrer]referrerRecord
	// named counts the referrers naming each Secret, whether or not it is watched.
	named map[cache.ObjectName]int
	// admitted holds, by namespace, the Secrets its referrers have watched, and
	// overCap those they name past the cap (admittedIn).
	admitted map[string][]cache.ObjectName
	overCap  map[string]map[cache.ObjectName]bool
	watches  map[cache.ObjectName]*secretWatch
	// judging is false until the referrers' initial lists and the listers of the scope
	// are in: until then references are recorded but open no watch, so that a start
	// does not open watches the complete picture would close.
	judging bool
	// referrersSynced holds the HasSynced of the referrer handlers.
	referrersSynced []cache.InformerSynced

	handlersMu sync.RWMutex
	handlers   []cache.ResourceEventHandler

	// synced is closed once HasSynced is true.
	synced  chan struct{}
	running sync.WaitGroup
}

// secretReferrer is a Gateway or ListenerSet whose listeners name Secrets.
type secretReferrer struct {
	kind string
	name cache.ObjectName
}

// secretWatch is the watch of one Secret and what it holds.
type secretWatch struct {
	key cache.ObjectName
	// refs counts the namespaces whose referrers have the Secret watched.
	refs int
	// store and controller are nil until the watch runs (Start).
	store      cache.Store
	controller cache.Controller
	cancel     context.CancelFunc
	// release is the pending stop once refs fell to 0; nil otherwise.
	release clock.Timer
}

// WithSecretClient has the Secret cache list and watch through client, whose rate
// limiter is the Secrets' own: every Secret a listener names is a watch and, against
// an API server without WatchList, a LIST, and in the main client's budget they would
// delay status writes and a new leader's start.
func WithSecretClient(client kubernetes.Interface) Option {
	return func(i *Informers, _ time.Duration) { i.secretClient = client }
}

// newSecretCache returns a cache reading with client, whose watches resync every
// resync (0: never); referenced is the index lookup described on SecretCache.
func newSecretCache(client kubernetes.Interface, resync time.Duration, referenced func(cache.ObjectName) bool, scope secretScope) *SecretCache {
	return &SecretCache{
		client:       client,
		resync:       resync,
		clock:        clock.RealClock{},
		releaseDelay: secretReleaseDelay,
		referenced:   referenced,
		scope:        scope,
		logger:       klog.Background().WithName("secrets"),
		referrers:    map[secretReferrer]referrerRecord{},
		named:        map[cache.ObjectName]int{},
		admitted:     map[string][]cache.ObjectName{},
		overCap:      map[string]map[cache.ObjectName]bool{},
		watches:      map[cache.ObjectName]*secretWatch{},
		synced:       make(chan struct{}),
	}
}

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

// Start runs the watches of the Secrets named so far, and those named from now on,
// until ctx is done. Requests log through ctx's logger.
func (c *SecretCache) Start(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ctx = ctx
	c.logger = klog.FromContext(ctx).WithName("secrets")
	for _, w := range c.watches {
		c.runLocked(w)
	}
	c.running.Go(func() { c.waitInitialLists(ctx) })
}

// Shutdown blocks until every watch goroutine has returned. End the context given to
// Start first, and stop what calls the referrer handlers (the Gateway and ListenerSet
// informers), or Shutdown waits forever.
func (c *SecretCache) Shutdown() {
	c.running.Wait()
}

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
