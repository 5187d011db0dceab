package consul

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	gosync "sync"
	"sync/atomic"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	kworkqueue "k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/informers"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayapi"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/metrics"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
	"github.com/consul-gateway-controller/consul-gateway-controller/workqueue"
)

// entryKinds are the Consul config entry kinds the syncer writes and watches.
var entryKinds = []string{consulapi.APIGateway, consulapi.HTTPRoute, consulapi.TCPRoute, consulapi.InlineCertificate, consulapi.ServiceDefaults, consulapi.ServiceResolver}

// Translator computes the desired entries from what was confirmed
// (translate.Translator). The syncer uses it from its translation loop alone.
type Translator interface {
	Update(translate.Changes) translate.Delta
	Translated() int
}

// Config is what NewSyncer needs.
type Config struct {
	Client    *consulapi.Client
	Naming    translate.Naming
	Ownership translate.Ownership
	Options   translate.Options
	// Secrets is the cache certificates are read from; Services, the one that says
	// whether the Service some service-defaults were written for still exists
	// (ServiceDefaultsGrace).
	Secrets  corelisters.SecretLister
	Services corelisters.ServiceLister
	// OwnerExists reports whether a Gateway or route is in the caches. An entry whose
	// owner exists but was never confirmed (its status write keeps failing) is kept as
	// it is rather than deleted; an entry whose owner is gone is deleted.
	OwnerExists func(kind gatewayv1.Kind, key cache.ObjectName) bool
	Workers     int
	// ServiceDefaultsGrace keeps the service-defaults of a Service that still exists
	// this long after nothing desires them (see ServiceDefaultsGrace); zero deletes
	// them at once.
	ServiceDefaultsGrace time.Duration
	// Clock times how long an entry has waited for Consul's judgement; nil means the
	// real clock.
	Clock clock.PassiveClock
	// Routes, when set, is told every owned route entry Consul holds each time the
	// watch lists a route kind (package consul/intentions).
	Routes RouteObserver
	// Translator, when set, replaces translate.NewTranslator(Naming, Ownership,
	// Options): a test gives the syncer hand-written entries through it.
	Translator Translator
}

// RouteObserver is told the route entries of ours that Consul holds: every owned
// entry of kind, each time the watch lists the kind. It must not block.
//
// ForgetRoutes tells it that the watch of kind failed or found Consul's index gone
// back: Consul may have lost its data, so what the watch said before may describe
// entries that no longer exist, and nothing should be done from it until the watch
// lists the kind again (ObserveRoutes).
type RouteObserver interface {
	ObserveRoutes(kind string, owned []consulapi.ConfigEntry)
	ForgetRoutes(kind string)
}

// Syncer keeps Consul equal to the translation of the confirmed objects. It consumes
// confirmations (Publish), keeps the confirmed snapshot, and writes the entries whose
// desired state changed with check-and-set. Blocking queries on every kind it writes
// bring back what drifted, and Consul's verdicts flow back to the status pipeline.
type Syncer struct {
	cfg   Config
	clock clock.PassiveClock
	queue kworkqueue.TypedRateLimitingInterface[translate.EntryKey]
	// translator is used by the translation loop alone.
	translator Translator

	mu       gosync.Mutex
	snapshot translate.Snapshot
	// confirmed holds every object a confirmation (of it or of its removal) named.
	confirmed map[ownerKey]bool
	verdicts  *verdicts
	// ledger is what is known of each entry: what is desired, what Consul holds, and
	// what waits; chains, which routes bound which backends (for the chain refresh).
	ledger *ledger
	chains *chainRefresher
	// version is the Consul server's version, "" until known.
	version atomic.Pointer[string]
	// secretsGiven are the Secrets as the translator was last given them.
	secretsGiven map[cache.ObjectName]*corev1.Secret
	// pending are the objects confirmed since the last translation, to be given to the
	// translator: new versions, removals, and new allocations of held versions.
	pending map[ownerKey]bool
	// verdictsRead is set once Consul's verdicts at start have been read (HasSynced).
	verdictsRead atomic.Bool
	// statusChanged asks the status pipeline to judge an object again because the
	// verdict on it changed (OnVerdictChange).
	statusChanged func(kind gatewayv1.Kind, key cache.ObjectName)
	// dirty wakes the translation loop; it holds at most one signal, so bursts of
	// confirmations coalesce into one translation.
	dirty chan struct{}
}

// NewSyncer builds a syncer; nothing talks to Consul until Run.
func NewSyncer(cfg Config) *Syncer {
	// Every kind's series exist from the start, so a rate over them is defined.
	for _, kind := range entryKinds {
		metrics.DriftCorrections.WithLabelValues(kind)
		metrics.GCDeletions.WithLabelValues(kind)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	translator := cfg.Translator
	if translator == nil {
		translator = translate.NewTranslator(cfg.Naming, cfg.Ownership, cfg.Options)
	}
	return &Syncer{
		cfg:          cfg,
		clock:        cfg.Clock,
		queue:        workqueue.New[translate.EntryKey]("consul"),
		translator:   translator,
		snapshot:     translate.NewSnapshot(),
		confirmed:    map[ownerKey]bool{},
		pending:      map[ownerKey]bool{},
		secretsGiven: map[cache.ObjectName]*corev1.Secret{},
		verdicts:     newVerdicts(cfg.Naming),
		ledger:       newLedger(),
		chains:       newChainRefresher(),
		dirty:        make(chan struct{}, 1),
	}
}

// Publish records a confirmation. It never blocks on Consul: an outage only delays the
// writes, the latest confirmed state is always what gets written.
//
// A confirmation of the version already held (the cache's copy of an object a status
// write returned, or an object judged again because a Secret or Service it refers to
// changed) keeps its translation; the object is given to the translator again only
// when it is another allocation (so the first can be freed), a route's decision
// changed (a backend Service that changed is in it), or a Secret a listener refers to
// is not the one the translator was last given.
func (s *Syncer) Publish(_ context.Context, c contract.Confirmation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	owner := ownerKey{c.Kind, c.Key}
	s.confirmed[owner] = true
	var held bool
	switch {
	case c.Kind == gatewayapi.GatewayKind:
		held = s.holdGateway(c)
	case c.Kind == gatewayapi.ListenerSetKind:
		held = s.holdListenerSet(c)
	case translate.TranslatesRoutes(c.Kind):
		held = s.holdRoute(c)
	default:
		return // GatewayClasses and routes of kinds Consul has no entry for produce none
	}
	if held {
		return // nothing the translation reads changed
	}
	if c.Object == nil {
		s.verdicts.forget(owner)
	}
	s.pending[owner] = true
	s.markDirty()
}

// holdGateway records a Gateway's confirmation, and reports whether it repeats the
// held version while every Secret it names is the one the last translation read.
// Callers hold s.mu.
func (s *Syncer) holdGateway(c contract.Confirmation) bool {
	return holdWithCertificates(s, s.snapshot.Gateways, c, gatewayapi.CertificateSecrets)
}

// holdListenerSet is holdGateway for a ListenerSet, whose listeners join its parent
// Gateway's entry. Callers hold s.mu.
func (s *Syncer) holdListenerSet(c contract.Confirmation) bool {
	return holdWithCertificates(s, s.snapshot.ListenerSets, c, func(set *gatewayv1.ListenerSet) []cache.ObjectName {
		return gatewayapi.CertificateSecretsOf(set.Namespace, set.Spec.Listeners)
	})
}

// holdWithCertificates records the confirmation of an object whose listeners name
// certificate Secrets in held, and reports whether it repeats the held version while
// every Secret it names is the one the last translation read.
func holdWithCertificates[T interface {
	comparable
	GetResourceVersion() string
}](s *Syncer, held map[cache.ObjectName]T, c contract.Confirmation, secrets func(T) []cache.ObjectName) bool {
	obj, ok := c.Object.(T)
	switch {
	case !ok:
		delete(held, c.Key)
	case sameVersion(held[c.Key], obj):
		another := held[c.Key] != obj
		held[c.Key] = obj // the cache's copy: the write's answer can go (see sameVersion)
		return !another && !referencesMoved(s.cfg.Secrets.Secrets, s.secretsGiven, secrets(obj))
	default:
		held[c.Key] = obj
	}
	return false
}

// holdRoute records a route's confirmation, and reports whether it repeats the held
// version with the same decision. The decision says what each backendRef resolved to
// (decision.Backend), so the translation reads no Service: a change to a backend
// Service makes the status pipeline decide the route again, and a changed decision
// is a new confirmation. Callers hold s.mu.
func (s *Syncer) holdRoute(c contract.Confirmation) bool {
	routes := s.snapshot.Routes[c.Kind]
	r, ok := c.Object.(gatewayapi.Object)
	if !ok || c.Route == nil {
		delete(routes, c.Key)
		return false
	}
	if held, isHeld := routes[c.Key]; isHeld && sameVersion(held.Route, r) && held.Decision.Equal(*c.Route) {
		routes[c.Key] = translate.ConfirmedRoute{Route: r, Decision: held.Decision} // as in holdWithCertificates
		return held.Route == r
	}
	routes[c.Key] = translate.ConfirmedRoute{Route: r, Decision: *c.Route}
	return false
}

// referencesMoved reports whether any of keys is, in the cache, another object than
// the one the last translation read: a cached object is replaced, never changed, so a
// different pointer is a change.
func referencesMoved[T comparable, L interface{ Get(string) (T, error) }](lister func(string) L, read map[cache.ObjectName]T, keys []cache.ObjectName) bool {
	for _, key := range keys {
		var zero T
		current, err := lister(key.Namespace).Get(key.Name)
		if err != nil {
			current = zero
		}
		if current != read[key] {
			return true
		}
	}
	return false
}

// sameVersion reports whether the confirmed object held is the same version of the
// object as confirmed: the object a status write returned and the cache's copy of it
// delivered later are one version in two allocations. The translation of the one held
// holds for the other (see Translator), and holding the cache's copy instead of the
// write's answer keeps one copy of each object in memory, not two. Versions are
// compared for equality only.
func sameVersion[T interface{ GetResourceVersion() string }](held, confirmed T) bool {
	if any(held) == nil || reflect.ValueOf(held).IsNil() {
		return false
	}
	return held.GetResourceVersion() != "" && held.GetResourceVersion() == confirmed.GetResourceVersion()
}

// OnVerdictChange registers f to be called with each object whose verdict changed, so
// its status is judged again. The status pipeline reads verdicts and the syncer tells
// it when they change: it is registered once both exist, before Run.
func (s *Syncer) OnVerdictChange(f func(kind gatewayv1.Kind, key cache.ObjectName)) {
	s.statusChanged = f
}

// Verdict implements the status pipeline's ConsulVerdicts.
func (s *Syncer) Verdict(kind gatewayv1.Kind, key cache.ObjectName) contract.Verdict {
	return s.verdicts.get(kind, key)
}

// Binding implements the status pipeline's ConsulVerdicts: Consul's Bound condition on the
// route's entry for a listener of gateway.
func (s *Syncer) Binding(kind gatewayv1.Kind, route, gateway cache.ObjectName, listener, consulListener gatewayv1.SectionName) contract.Binding {
	return s.verdicts.binding(kind, route, gateway, listener, consulListener)
}

func (s *Syncer) markDirty() {
	select {
	case s.dirty <- struct{}{}:
	default:
	}
}

// translatePause is how long the translation loop rests after a translation that took
// busy: as long again, so that a burst of confirmations (a cold start confirms every
// object twice) costs at most half a core however many objects each translation walks,
// and a change that comes during the burst waits at most one more translation. A change
// that comes alone is translated at once.
func translatePause(busy time.Duration) time.Duration { return min(busy, time.Second) }

// translate gives the translator what was confirmed since the last translation,
// queues every entry whose desired state changed, appeared or went away, and returns
// how long that took.
func (s *Syncer) translate(ctx context.Context) time.Duration {
	start := time.Now()
	s.mu.Lock()
	changes := s.pendingChanges()
	s.mu.Unlock()

	delta := s.translator.Update(changes)
	metrics.TranslateDuration.Observe(time.Since(start).Seconds())
	metrics.TranslatedObjects.Add(float64(s.translator.Translated()))
	// The new desired state is in place before any key is queued: a worker that takes
	// a key at once must see it, or it would compare against the old state, find
	// nothing to do, and the change would wait for the next drift check.
	queue, entries := s.ledger.desire(delta.Entries)
	inWriteOrder(queue)
	s.mu.Lock()
	for _, key := range delta.ReleasedSecrets {
		delete(s.secretsGiven, key)
	}
	s.mu.Unlock()
	for _, key := range queue {
		s.queue.Add(key)
	}
	if delta.ProblemsChanged {
		s.verdicts.setProblems(delta.Problems, s.statusChanged)
	}
	klog.FromContext(ctx).V(4).Info("Translated confirmed objects", "entries", entries, "translated", s.translator.Translated(), "changed", len(queue), "problems", len(delta.Problems))
	return time.Since(start)
}

// pendingChanges are the pending objects as held now, and the Secrets they refer to as
// the cache holds them now (a route's decision holds what the translation needs of its
// backends); it empties pending but for the routes that await a Gateway
// (awaitsGateway). Callers hold s.mu.
func (s *Syncer) pendingChanges() translate.Changes {
	c := translate.Changes(translate.NewSnapshot())
	for owner := range s.pending {
		switch owner.kind {
		case gatewayapi.GatewayKind:
			gw := s.snapshot.Gateways[owner.key]
			c.Gateways[owner.key] = gw
			if gw != nil {
				addReferences(c.Secrets, s.secretsGiven, gatewayapi.CertificateSecrets(gw), s.cfg.Secrets.Secrets)
			}
		case gatewayapi.ListenerSetKind:
			set := s.snapshot.ListenerSets[owner.key]
			c.ListenerSets[owner.key] = set
			if set != nil {
				addReferences(c.Secrets, s.secretsGiven, gatewayapi.CertificateSecretsOf(set.Namespace, set.Spec.Listeners), s.cfg.Secrets.Secrets)
			}
		default:
			route := s.snapshot.Routes[owner.kind][owner.key]
			if s.awaitsGateway(route) {
				continue // stays pending: the Gateway's confirmation wakes the loop
			}
			c.Routes[owner.kind][owner.key] = route
		}
		delete(s.pending, owner)
	}
	return c
}

// awaitsGateway reports whether a route is accepted on a Gateway that exists but has
// not been confirmed yet. Translated before it, the route would find none of its
// listeners written: its entry would be withdrawn and its status would say it is not
// served, only to be put back a moment later. A new leader confirms objects in no
// particular order, so this is what its first translations would see. Callers hold
// s.mu.
func (s *Syncer) awaitsGateway(route translate.ConfirmedRoute) bool {
	if route.Route == nil || s.cfg.OwnerExists == nil {
		return false
	}
	for _, a := range route.Decision.Attachments {
		if !s.confirmed[ownerKey{gatewayapi.GatewayKind, a.Gateway}] && s.cfg.OwnerExists(gatewayapi.GatewayKind, a.Gateway) {
			return true
		}
	}
	return false
}

// addReferences reads keys from a namespaced lister into changes, the zero value for
// those it does not hold, and records what it read in given.
func addReferences[T comparable, L interface{ Get(string) (T, error) }](changes, given map[cache.ObjectName]T, keys []cache.ObjectName, lister func(string) L) {
	for _, key := range keys {
		if _, seen := changes[key]; seen {
			continue
		}
		var zero T
		obj, err := lister(key.Namespace).Get(key.Name)
		if err != nil {
			// A Secret past its namespace's cap is not watched: as absent as a
			// missing one, and its listener's status already says why.
			var overCap *informers.SecretOverCapError
			if !apierrors.IsNotFound(err) && !errors.As(err, &overCap) {
				utilruntime.HandleError(fmt.Errorf("read %s from cache: %w", key, err))
			}
			obj = zero
		}
		changes[key] = obj
		if obj == zero {
			delete(given, key)
			continue
		}
		given[key] = obj
	}
}

// desiredEntry returns the entry Consul must hold under key, if any.
func (s *Syncer) desiredEntry(key translate.EntryKey) (consulapi.ConfigEntry, bool) {
	return s.ledger.desiredEntry(key)
}
