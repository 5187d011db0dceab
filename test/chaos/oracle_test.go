package chaos

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	gosync "sync"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"

	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
)

// oracle watches everything the scenario can change, while it runs, and checks the
// invariants on each observation as it arrives: informers for the Kubernetes objects
// (every watch event, a relist after a 410 included), blocking queries for Consul's
// config entries. Violations are kept, not fatal, so one run reports them all.
type oracle struct {
	env *scenarioEnv

	mu         gosync.Mutex
	violations []string
	checks     map[string]int // invariant -> observations checked

	// no regression: the highest observedGeneration seen per object UID and condition.
	statusGen map[types.UID]map[string]int64
	// no regression in Consul: the highest marker seen per entry.
	entryMarker map[string]int
	// foreign parent statuses: the highest foreign write seen per route UID.
	foreignSeen map[types.UID]int
	// foreign Consul entries: kind/name -> the content they must keep.
	foreignEntries map[string]string
	consulEpoch    int // bumped when Consul lost its data on purpose
	// Lease terms, in the order observed.
	terms []term
	// steps back from Consul's Accepted, and the changes that explain them.
	verdicts verdicts
}

type term struct {
	holder string
	from   time.Time // the Lease's acquireTime, by the acquirer's clock (this machine's)
}

// The edit numbers the world writes into what reaches Consul: an HTTPRoute's path, a
// Gateway's hostname, the certificate's name, the TCPRoute's backend Service's name.
var (
	pathMarker = regexp.MustCompile(`^/m(\d+)$`)
	hostMarker = regexp.MustCompile(`^g(\d+)\.chaos\.test$`)
	certMarker = regexp.MustCompile(`^c(\d+)\.chaos\.test$`)
	tcpMarker  = regexp.MustCompile(`-tcp-(\d+)$`) // the world's Service tcp-N (world.service)
)

func newOracle(env *scenarioEnv) *oracle {
	return &oracle{
		env: env, checks: map[string]int{},
		statusGen: map[types.UID]map[string]int64{}, entryMarker: map[string]int{},
		foreignSeen: map[types.UID]int{}, foreignEntries: map[string]string{},
		verdicts: newVerdicts(),
	}
}

func (o *oracle) violate(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.violateLocked(format, args...)
}

// violateLocked records a violation with the time it was seen; o.mu is held.
func (o *oracle) violateLocked(format string, args ...any) {
	o.violations = append(o.violations, fmt.Sprintf(time.Now().Format("15:04:05.000 ")+format, args...))
}

func (o *oracle) checked(invariant string, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.checks[invariant] += n
}

// start runs the watches until ctx ends; it returns once the informers synced.
func (o *oracle) start(ctx context.Context) error {
	gwFactory := gatewayinformers.NewSharedInformerFactoryWithOptions(o.env.gw, 0, gatewayinformers.WithNamespace(o.env.ns))
	handle := func(inf cache.SharedIndexInformer) error {
		_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { o.observeKube(obj) },
			UpdateFunc: func(_, obj any) { o.observeKube(obj) },
		})
		return err
	}
	for _, inf := range []cache.SharedIndexInformer{
		gwFactory.Gateway().V1().Gateways().Informer(),
		gwFactory.Gateway().V1().HTTPRoutes().Informer(),
		gwFactory.Gateway().V1().TCPRoutes().Informer(),
	} {
		if err := handle(inf); err != nil {
			return err
		}
	}
	kubeFactory := kubeinformers.NewSharedInformerFactoryWithOptions(o.env.kube, 0, kubeinformers.WithNamespace(o.env.ns),
		kubeinformers.WithTweakListOptions(func(opts *metav1.ListOptions) { opts.FieldSelector = "metadata.name=" + leaseName }))
	if err := handle(kubeFactory.Coordination().V1().Leases().Informer()); err != nil {
		return err
	}
	gwFactory.Start(ctx.Done())
	kubeFactory.Start(ctx.Done())
	for typ, ok := range gwFactory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("oracle: %v did not sync", typ)
		}
	}
	for typ, ok := range kubeFactory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("oracle: %v did not sync", typ)
		}
	}
	for _, kind := range entryKinds {
		go o.watchConsul(ctx, kind)
	}
	return nil
}

var entryKinds = []string{consulapi.APIGateway, consulapi.HTTPRoute, consulapi.TCPRoute, consulapi.InlineCertificate, consulapi.ServiceDefaults}

func (o *oracle) observeKube(obj any) {
	switch obj := obj.(type) {
	case *gatewayv1.Gateway:
		o.observeGateway(obj)
	case *gatewayv1.HTTPRoute:
		o.observeRoute(obj.UID, "HTTPRoute/"+obj.Name, obj.Status.Parents)
	case *gatewayv1.TCPRoute:
		o.observeRoute(obj.UID, "TCPRoute/"+obj.Name, obj.Status.Parents)
	case *coordinationv1.Lease:
		o.observeLease(obj)
	}
}

// observeGenerations checks that no condition's observedGeneration goes back.
func (o *oracle) observeGenerations(uid types.UID, what string, conds map[string]int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	seen := o.statusGen[uid]
	if seen == nil {
		seen = map[string]int64{}
		o.statusGen[uid] = seen
	}
	for key, gen := range conds {
		o.checks["no regression (status)"]++
		if gen < seen[key] {
			o.violateLocked("no regression: %s %s went from observedGeneration %d back to %d", what, key, seen[key], gen)
			continue
		}
		seen[key] = gen
	}
}

const (
	foreignController = "chaos.example/foreign"
	foreignCondition  = "chaos.example/Audited"
)

func (o *oracle) observeGateway(gw *gatewayv1.Gateway) {
	what := "Gateway " + gw.Name
	if gw.Name == foreignGW {
		o.checked("ownership (kubernetes)", 1)
		// The CRD's default status says Pending; anything else was written.
		written := len(gw.Status.Listeners) > 0 || slices.ContainsFunc(gw.Status.Conditions, func(c metav1.Condition) bool { return c.Reason != "Pending" })
		if written {
			o.violate("ownership: %s of the foreign class got status %v", what, gw.Status.Conditions)
		}
		return
	}
	conds := map[string]int64{}
	for _, c := range gw.Status.Conditions {
		if c.Type == foreignCondition {
			o.observeForeign(gw.UID, what, c.Message)
			continue
		}
		conds[c.Type] = c.ObservedGeneration
	}
	for _, l := range gw.Status.Listeners {
		for _, c := range l.Conditions {
			conds[string(l.Name)+"/"+c.Type] = c.ObservedGeneration
		}
	}
	o.observeGenerations(gw.UID, what, conds)
	o.expectForeign(gw.UID, what, slices.ContainsFunc(gw.Status.Conditions, func(c metav1.Condition) bool { return c.Type == foreignCondition }))
}

// observeRoute checks a route's status; route is its kind and name ("HTTPRoute/r-1").
func (o *oracle) observeRoute(uid types.UID, route string, parents []gatewayv1.RouteParentStatus) {
	what := "route " + route
	conds := map[string]int64{}
	foreign := false
	ours := map[string]bool{}
	for _, p := range parents {
		switch string(p.ControllerName) {
		case o.env.controllerName:
			ours[string(p.ParentRef.Name)] = true
			o.checked("ownership (kubernetes)", 1)
			if p.ParentRef.Name == foreignGW {
				o.violate("ownership: %s has a status of ours for the foreign Gateway", what)
			}
			for _, c := range p.Conditions {
				conds[string(p.ParentRef.Name)+"/"+c.Type] = c.ObservedGeneration
				if c.Type == gwsync.ConsulAcceptedCondition {
					o.mu.Lock()
					o.observeVerdict(uid, route, string(p.ParentRef.Name), c)
					o.mu.Unlock()
				}
			}
		case foreignController:
			foreign = true
			for _, c := range p.Conditions {
				o.observeForeign(uid, what, c.Message)
			}
		}
	}
	o.observeGenerations(uid, what, conds)
	o.expectForeign(uid, what, foreign)
	o.mu.Lock()
	o.forgetVerdictsOfParentsGone(uid, ours)
	o.mu.Unlock()
}

// observeForeign checks that the foreign writer's status only moves forward: it
// numbers its writes in the message.
func (o *oracle) observeForeign(uid types.UID, what, message string) {
	n, err := strconv.Atoi(strings.TrimPrefix(message, "foreign write "))
	if err != nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.checks["ownership (kubernetes)"]++
	if n < o.foreignSeen[uid] {
		o.violateLocked("ownership: %s's foreign status went back from write %d to %d", what, o.foreignSeen[uid], n)
		return
	}
	o.foreignSeen[uid] = n
}

// expectForeign: once a foreign status was seen on an object, every later version
// keeps one (the foreign writer never removes its own).
func (o *oracle) expectForeign(uid types.UID, what string, present bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, seen := o.foreignSeen[uid]; !seen || present {
		return
	}
	o.checks["ownership (kubernetes)"]++
	o.violateLocked("ownership: %s lost the foreign controller's status", what)
}

func (o *oracle) observeLease(l *coordinationv1.Lease) {
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || l.Spec.AcquireTime == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	t := term{holder: *l.Spec.HolderIdentity, from: l.Spec.AcquireTime.Time}
	if n := len(o.terms); n > 0 && o.terms[n-1] == t {
		return
	}
	o.terms = append(o.terms, t)
}

// watchConsul follows one entry kind with blocking queries, Consul's watch. After an
// error (Consul restarting) it starts again from index 0.
//
// The reads are consistent. A restarted Consul restores its last snapshot and then
// applies the rest of its log as the new leader, and a read in the default mode can
// answer in between: it would show entries going back to the snapshot's content and
// forward again, which is Consul replaying its own history, not a write. A consistent
// read waits until the leader's barrier has applied the whole log.
func (o *oracle) watchConsul(ctx context.Context, kind string) {
	var index uint64
	for ctx.Err() == nil {
		opts := (&consulapi.QueryOptions{WaitIndex: index, WaitTime: 10 * time.Second, RequireConsistent: true}).WithContext(ctx)
		entries, meta, err := o.env.consul.ConfigEntries().List(kind, opts)
		if err != nil {
			index = 0
			sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		if meta.LastIndex < index {
			index = 0 // Consul came back with less state; start over
		} else {
			index = meta.LastIndex
		}
		o.observeEntries(kind, entries)
	}
}

func (o *oracle) observeEntries(kind string, entries []consulapi.ConfigEntry) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if kind == consulapi.HTTPRoute || kind == consulapi.TCPRoute {
		o.observeRouteEntries(kind, entries)
	}
	present := map[string]bool{}
	for _, e := range entries {
		key := kind + "/" + e.GetName()
		present[key] = true
		if want, foreign := o.foreignEntries[key]; foreign {
			o.checks["ownership (consul)"]++
			if got := content(e); got != want {
				o.violateLocked("ownership: foreign entry %s was modified: %s, was %s", key, got, want)
				o.foreignEntries[key] = got
			}
			continue
		}
		if !o.env.owns(e.GetMeta()) {
			continue
		}
		marker, ok := entryMarker(e)
		if !ok {
			continue
		}
		o.checks["no regression (consul)"]++
		if marker < o.entryMarker[key] {
			o.violateLocked("no regression: entry %s went from edit %d back to edit %d", key, o.entryMarker[key], marker)
			continue
		}
		o.entryMarker[key] = marker
	}
	for key := range o.foreignEntries {
		if strings.HasPrefix(key, kind+"/") && !present[key] {
			o.checks["ownership (consul)"]++
			o.violateLocked("ownership: foreign entry %s was deleted", key)
			delete(o.foreignEntries, key)
		}
	}
}

// entryMarker is the newest edit an owned route, gateway or certificate entry
// reflects: the highest /m<n> path, g<n> hostname, c<n> certificate name or tcp-<n>
// service in it. A tcp-route to a Service without a number reflects the route as
// created, edit 0, so that going back to it is a regression too.
func entryMarker(e consulapi.ConfigEntry) (int, bool) {
	best, found := 0, false
	note := func(re *regexp.Regexp, s string) {
		m := re.FindStringSubmatch(s)
		if m == nil {
			return
		}
		if n, err := strconv.Atoi(m[1]); err == nil && n >= best {
			best, found = n, true
		}
	}
	switch e := e.(type) {
	case *consulapi.HTTPRouteConfigEntry:
		for _, r := range e.Rules {
			for _, m := range r.Matches {
				note(pathMarker, m.Path.Value)
			}
		}
	case *consulapi.APIGatewayConfigEntry:
		for _, l := range e.Listeners {
			note(hostMarker, l.Hostname)
		}
	case *consulapi.TCPRouteConfigEntry:
		found = true
		for _, svc := range e.Services {
			note(tcpMarker, svc.Name)
		}
	case *consulapi.InlineCertificateConfigEntry:
		for _, name := range certificateNames(e.Certificate) {
			note(certMarker, name)
		}
	}
	return best, found
}

// certificateNames are the subject and DNS names of the PEM certificate's first
// certificate; none when it does not parse.
func certificateNames(data string) []string {
	block, _ := pem.Decode([]byte(data))
	if block == nil {
		return nil
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil
	}
	return append([]string{cert.Subject.CommonName}, cert.DNSNames...)
}

// putForeignEntries writes entries no controller of ours may touch: one with another
// controller's meta, one with our controller name but another cluster, one with none.
func (o *oracle) putForeignEntries(ctx context.Context) error {
	entries := []consulapi.ConfigEntry{
		&consulapi.HTTPRouteConfigEntry{Kind: consulapi.HTTPRoute, Name: o.env.ns + "-foreign-route",
			Meta: map[string]string{"gateway-controller": foreignController, "gateway-controller-cluster": "default"}},
		&consulapi.HTTPRouteConfigEntry{Kind: consulapi.HTTPRoute, Name: o.env.ns + "-other-cluster",
			Meta: map[string]string{"gateway-controller": o.env.controllerName, "gateway-controller-cluster": "other"}},
		&consulapi.ServiceConfigEntry{Kind: consulapi.ServiceDefaults, Name: o.env.ns + "-foreign-svc", Protocol: "http"},
	}
	entries = append(entries, backendDefaults(o.env.ns)...)
	for _, e := range entries {
		if _, _, err := o.env.consul.ConfigEntries().Set(e, (&consulapi.WriteOptions{}).WithContext(ctx)); err != nil {
			return fmt.Errorf("put foreign entry %s: %w", e.GetName(), err)
		}
		got, _, err := o.env.consul.ConfigEntries().Get(e.GetKind(), e.GetName(), (&consulapi.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return err
		}
		o.mu.Lock()
		o.foreignEntries[e.GetKind()+"/"+e.GetName()] = content(got)
		o.mu.Unlock()
	}
	return nil
}

// backendDefaults are the service-defaults an operator gives the world's HTTP
// backends (the chaos replicas run without --manage-service-defaults): protocol http,
// without which Consul refuses every http-route to them (InvalidDiscoveryChain). With
// them every entry the world asks for is one Consul accepts, so convergence can
// require Consul's acceptance rather than take whatever verdict it gave. The TCPRoute's
// backends (tcp-N) keep Consul's default protocol, tcp. They are foreign entries: the
// controller must leave them as they are.
func backendDefaults(ns string) []consulapi.ConfigEntry {
	var out []consulapi.ConfigEntry
	for i := range serviceCount {
		out = append(out, &consulapi.ServiceConfigEntry{Kind: consulapi.ServiceDefaults, Name: ns + "-svc-" + strconv.Itoa(i), Protocol: "http"})
	}
	return append(out, &consulapi.ServiceConfigEntry{Kind: consulapi.ServiceDefaults, Name: ns + "-" + remoteSvc, Protocol: "http"})
}

// forgetConsul is called before Consul is wiped on purpose: what it held is gone by
// design, so the foreign entries and markers are tracked anew. Every route's entries
// are gone too: that is a change of them (the step-back check), whether or not the
// oracle's watch answers while Consul is empty, and their rewrite with the same
// content is then seen as another.
func (o *oracle) forgetConsul() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.foreignEntries = map[string]string{}
	o.consulEpoch++
	now := time.Now()
	for _, seen := range o.verdicts.entries {
		for route := range seen {
			o.verdicts.changes[route] = append(o.verdicts.changes[route], now)
			delete(seen, route)
		}
	}
}

// checkSingleWriter: every write a replica's proxy forwarded falls in a term of that
// replica: at or after its acquireTime, before the next holder's. A write before any
// term, or after another replica acquired the Lease, is two writers at once.
func (o *oracle) checkSingleWriter(writes []write) {
	o.mu.Lock()
	terms := slices.Clone(o.terms)
	o.mu.Unlock()
	slices.SortStableFunc(terms, func(a, b term) int { return a.from.Compare(b.from) })
	for _, w := range writes {
		o.checked("single writer", 1)
		holder := ""
		for _, t := range terms {
			if t.from.After(w.at) {
				break
			}
			holder = t.holder
		}
		if holder != w.replica {
			o.violate("single writer: %s wrote %s %s %s at %s while the Lease was %q's", w.replica, w.target, w.method, w.path, w.at.Format("15:04:05.000000"), holder)
		}
	}
}

// checkCheckAndSet: every config entry write a replica sent carries cas=, so that
// a write over an entry someone changed since it was read fails instead of undoing
// the change (the foreign writer fault rewrites entries to catch exactly that).
func (o *oracle) checkCheckAndSet(writes []write) {
	for _, w := range writes {
		if !w.configEntryWrite() {
			continue
		}
		o.checked("check-and-set", 1)
		query, err := url.ParseQuery(w.query)
		if err != nil || !query.Has("cas") {
			o.violate("check-and-set: %s wrote %s %s (query %q) at %s without cas=", w.replica, w.method, w.path, w.query, w.at.Format("15:04:05.000000"))
		}
	}
}

// content is what a writer put in an entry: its JSON without the indexes and the
// status, which Consul's own gateway controller writes on route entries.
func content(e consulapi.ConfigEntry) string {
	data, err := json.Marshal(e)
	if err != nil {
		return err.Error()
	}
	var fields map[string]any
	if err := json.Unmarshal(data, &fields); err != nil {
		return err.Error()
	}
	for _, k := range []string{"CreateIndex", "ModifyIndex", "Status"} {
		delete(fields, k)
	}
	data, _ = json.Marshal(fields)
	return string(data)
}
