package informers

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
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
// only tls.crt and tls.key, and neither of a Secret larger than maxCertificateBytes
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
