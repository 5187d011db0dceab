package identity

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	gosync "sync"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/listers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	kworkqueue "k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewaylisters "sigs.k8s.io/gateway-api/pkg/client/listers/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/metrics"
	gwsync "github.com/consul-gateway-controller/consul-gateway-controller/sync"
	"github.com/consul-gateway-controller/consul-gateway-controller/workqueue"
)

// Config is what NewManager needs.
type Config struct {
	Client *consulapi.Client
	Namer  Namer
	Naming translate.Naming
	// Classes and Configs give a Gateway's GatewayConfig, which may name the auth
	// method its pods log in to.
	Classes gatewaylisters.GatewayClassLister
	Configs listers.ResourceIndexer[*v1alpha1.GatewayConfig]
	// Pods says how a Gateway's pods log in: their ServiceAccount's name and the auth
	// method, from the Gateway's GatewayConfig (nil for none) and the flags.
	Pods func(gw *gatewayv1.Gateway, config *v1alpha1.GatewayConfig) (serviceAccount, authMethod string)
	// ServiceAccounts holds the ServiceAccounts the data plane created (its owned
	// cache): only one the Gateway controls is bound, by its UID.
	ServiceAccounts corelisters.ServiceAccountLister
	// ServiceAccountsSynced reports whether ServiceAccounts holds its first list:
	// before, every ServiceAccount would look missing and every identity be removed.
	ServiceAccountsSynced cache.InformerSynced
	Workers               int
}

// Manager keeps each confirmed, accepted Gateway's identity in Consul and removes the
// identities of Gateways that went. Only the leader runs it.
type Manager struct {
	cfg   Config
	queue kworkqueue.TypedRateLimitingInterface[cache.ObjectName]

	// gateways holds the confirmed Gateways, and those an object of ours names, so
	// the identity of one that is gone is removed.
	gateways *gwsync.AcceptedGateways

	mu gosync.Mutex
	// problems says, per accepted Gateway, why its identity is not what it should be.
	problems  map[cache.ObjectName]string
	onProblem func(cache.ObjectName)
}

// NewManager builds a manager; nothing talks to Consul until Run.
func NewManager(cfg Config) *Manager {
	return &Manager{
		cfg:       cfg,
		queue:     workqueue.New[cache.ObjectName]("identity"),
		gateways:  gwsync.NewAcceptedGateways(),
		problems:  map[cache.ObjectName]string{},
		onProblem: func(cache.ObjectName) {},
	}
}

// OnProblemChange calls f with a Gateway whose problem (see Problem) changed. Call it
// before Run.
func (m *Manager) OnProblemChange(f func(gateway cache.ObjectName)) { m.onProblem = f }

// Problem says why the Gateway's pods cannot log in with the identity they should
// have; "" when nothing is known to be wrong.
func (m *Manager) Problem(gateway cache.ObjectName) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.problems[gateway]
}

// Publish implements the status pipeline's Publisher: a Gateway accepted at its
// current generation has an identity; any other has none.
func (m *Manager) Publish(_ context.Context, c gwsync.Confirmation) {
	if key, ok := m.gateways.Record(c); ok {
		m.queue.Add(key)
	}
}

// Enqueue asks for a Gateway's identity to be compared again, for example when its
// GatewayConfig changed.
func (m *Manager) Enqueue(gateway cache.ObjectName) { m.queue.Add(gateway) }

// Run keeps the identities until ctx is done, from when the status pipeline has
// confirmed every object once (initialSyncDone): before, an object of ours whose
// Gateway sent no confirmation yet would look orphaned.
func (m *Manager) Run(ctx context.Context, initialSyncDone <-chan struct{}) error {
	select {
	case <-initialSyncDone:
	case <-ctx.Done():
		return nil
	}
	if !cache.WaitForNamedCacheSyncWithContext(ctx, m.cfg.ServiceAccountsSynced) {
		return nil
	}
	var wg gosync.WaitGroup
	for _, list := range m.lists() {
		wg.Go(func() { m.watch(ctx, list) })
	}
	workqueue.Run(ctx, "identity", m.queue, m.cfg.Workers, m.sync)
	wg.Wait()
	return nil
}

func (m *Manager) sync(ctx context.Context, key cache.ObjectName) error {
	gw, known := m.gateways.Get(key)
	if !known {
		return nil
	}
	var want *Identity
	if gw != nil {
		in, ok, err := m.input(gw)
		if err != nil || !ok {
			return err
		}
		uid, bound, err := m.serviceAccountUID(gw, in.ServiceAccount)
		if err != nil {
			return err
		}
		if bound {
			in.ServiceAccountUID = uid
			id := m.cfg.Namer.Desired(in)
			want = &id
		} else {
			klog.FromContext(ctx).V(4).Info("Gateway ServiceAccount missing or not the Gateway's; no identity", "gateway", key, "serviceAccount", in.ServiceAccount)
		}
	}
	err := m.converge(ctx, key, want)
	m.report(ctx, key, want != nil, err)
	if err == nil && want == nil {
		m.gateways.ForgetIfGone(key)
	}
	var problem problemError
	if errors.As(err, &problem) && !problem.retry {
		return nil // nothing a retry can fix; a change in Consul brings the key back
	}
	return err
}

// input is what the Gateway's identity is made of; ok is false while its parameters
// cannot be used (its status says why), and what it has keeps as it is, as the data
// plane does.
func (m *Manager) input(gw *gatewayv1.Gateway) (in Input, ok bool, err error) {
	class, err := m.cfg.Classes.Get(string(gw.Spec.GatewayClassName))
	if apierrors.IsNotFound(err) {
		return Input{}, false, nil
	}
	if err != nil {
		return Input{}, false, fmt.Errorf("get GatewayClass %s: %w", gw.Spec.GatewayClassName, err)
	}
	config, problem, err := gwsync.GatewayConfigFor(m.cfg.Configs, gw, class)
	if err != nil || problem != "" {
		return Input{}, false, err
	}
	serviceAccount, authMethod := m.cfg.Pods(gw, config)
	key := cache.MetaObjectToName(gw)
	return Input{
		Gateway:        key,
		Service:        m.cfg.Naming.EntryName(key.Namespace, key.Name),
		ServiceAccount: serviceAccount,
		AuthMethod:     authMethod,
	}, authMethod != "", nil
}

// serviceAccountUID is the UID of the Gateway's ServiceAccount when the Gateway
// controls it; ok is false while it is missing or someone else's (the data plane's
// status names the conflict): then no login may get the Gateway's role.
func (m *Manager) serviceAccountUID(gw *gatewayv1.Gateway, name string) (uid types.UID, ok bool, err error) {
	sa, err := m.cfg.ServiceAccounts.ServiceAccounts(gw.Namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("get ServiceAccount %s/%s from cache: %w", gw.Namespace, name, err)
	}
	if !metav1.IsControlledBy(sa, gw) {
		return "", false, nil
	}
	return sa.UID, true, nil
}

// report records the problem of an accepted Gateway's identity, and tells the status
// pipeline when it changed.
func (m *Manager) report(ctx context.Context, key cache.ObjectName, wanted bool, err error) {
	problem := ""
	var p problemError
	if wanted && errors.As(err, &p) {
		problem = p.Error()
	}
	m.mu.Lock()
	changed := m.problems[key] != problem
	if problem == "" {
		delete(m.problems, key)
	} else {
		m.problems[key] = problem
	}
	m.mu.Unlock()
	if changed {
		klog.FromContext(ctx).V(2).Info("Gateway identity problem changed", "gateway", key, "problem", problem)
		m.onProblem(key)
	}
}

// problemError is a reason the Gateway's pods cannot get their identity that its
// status reports. retry is set when a retry may fix it without any change in Consul
// being seen (a token that gains its permission).
type problemError struct {
	msg   string
	retry bool
}

func (e problemError) Error() string { return e.msg }

// classify turns the refusals a user must act on into problems; other errors (Consul
// unreachable) are retried without a word on the Gateway.
func classify(err error, what string) error {
	var status consulapi.StatusError
	if !errors.As(err, &status) {
		return fmt.Errorf("%s: %w", what, err)
	}
	switch {
	case status.Code == http.StatusUnauthorized && strings.Contains(status.Body, "ACL support disabled"):
		return problemError{msg: fmt.Sprintf("cannot %s: Consul's ACLs are disabled, so gateway pods cannot log in; turn ACLs on or run the controller without --gateway-auth-method", what), retry: true}
	case status.Code == http.StatusForbidden:
		return problemError{msg: fmt.Sprintf("cannot %s: the controller's Consul token lacks acl = \"write\": %s", what, status.Body), retry: true}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// converge makes Consul hold exactly want for the Gateway (nothing when want is nil).
// What exists and is not ours is never changed; its name then makes a problem.
func (m *Manager) converge(ctx context.Context, key cache.ObjectName, want *Identity) error {
	rules, err := m.ownedBindingRules(ctx, key)
	if err != nil {
		return err
	}
	if want == nil {
		return m.remove(ctx, key, rules)
	}
	method, _, err := m.cfg.Client.ACL().AuthMethodRead(want.BindingRule.AuthMethod, m.query(ctx))
	if err != nil {
		return classify(err, "read auth method "+want.BindingRule.AuthMethod)
	}
	if method == nil {
		return problemError{msg: fmt.Sprintf("Consul has no auth method %q for the gateway pods to log in to", want.BindingRule.AuthMethod)}
	}
	policyID, err := m.ensurePolicy(ctx, want)
	if err != nil {
		return err
	}
	if err := m.ensureRole(ctx, want, policyID); err != nil {
		return err
	}
	return m.ensureBindingRule(ctx, want, rules)
}

func (m *Manager) query(ctx context.Context) *consulapi.QueryOptions {
	return (&consulapi.QueryOptions{Partition: m.cfg.Naming.Partition, RequireConsistent: true}).WithContext(ctx)
}

func (m *Manager) write(ctx context.Context) *consulapi.WriteOptions {
	return (&consulapi.WriteOptions{Partition: m.cfg.Naming.Partition}).WithContext(ctx)
}

func (m *Manager) ensurePolicy(ctx context.Context, want *Identity) (string, error) {
	have, _, err := m.cfg.Client.ACL().PolicyReadByName(want.Name, m.query(ctx))
	if err != nil {
		return "", classify(err, "read ACL policy "+want.Name)
	}
	if have != nil && have.Description != want.Description {
		return "", notOurs("policy", want.Name)
	}
	if have != nil && have.Rules == want.Rules {
		return have.ID, nil
	}
	policy := &consulapi.ACLPolicy{Name: want.Name, Description: want.Description, Rules: want.Rules, Partition: m.cfg.Naming.Partition}
	op, write := "create", m.cfg.Client.ACL().PolicyCreate
	if have != nil {
		policy.ID, op, write = have.ID, "update", m.cfg.Client.ACL().PolicyUpdate
	}
	written, _, err := write(policy, m.write(ctx))
	countWrite("policy", op, err)
	if err != nil {
		return "", classify(err, op+" ACL policy "+want.Name)
	}
	klog.FromContext(ctx).V(2).Info("Wrote gateway ACL policy", "gateway", want.Gateway, "policy", want.Name, "operation", op)
	return written.ID, nil
}

func (m *Manager) ensureRole(ctx context.Context, want *Identity, policyID string) error {
	have, _, err := m.cfg.Client.ACL().RoleReadByName(want.Name, m.query(ctx))
	if err != nil {
		return classify(err, "read ACL role "+want.Name)
	}
	if have != nil && have.Description != want.Description {
		return notOurs("role", want.Name)
	}
	if have != nil && len(have.Policies) == 1 && have.Policies[0].ID == policyID &&
		len(have.ServiceIdentities)+len(have.NodeIdentities)+len(have.TemplatedPolicies) == 0 {
		return nil
	}
	role := &consulapi.ACLRole{
		Name: want.Name, Description: want.Description, Partition: m.cfg.Naming.Partition,
		Policies: []*consulapi.ACLRolePolicyLink{{ID: policyID}},
	}
	op, write := "create", m.cfg.Client.ACL().RoleCreate
	if have != nil {
		role.ID, op, write = have.ID, "update", m.cfg.Client.ACL().RoleUpdate
	}
	_, _, err = write(role, m.write(ctx))
	countWrite("role", op, err)
	if err != nil {
		return classify(err, op+" ACL role "+want.Name)
	}
	klog.FromContext(ctx).V(2).Info("Wrote gateway ACL role", "gateway", want.Gateway, "role", want.Name, "operation", op)
	return nil
}

// ensureBindingRule keeps exactly one binding rule of ours for the Gateway, equal to
// want's. Consul does not move a rule to another auth method, so one of another method
// is deleted and a new one created.
func (m *Manager) ensureBindingRule(ctx context.Context, want *Identity, ours []*consulapi.ACLBindingRule) error {
	var keep *consulapi.ACLBindingRule
	var errs []error
	for _, rule := range ours {
		if keep == nil && rule.AuthMethod == want.BindingRule.AuthMethod {
			keep = rule
			continue
		}
		errs = append(errs, m.deleteBindingRule(ctx, want.Gateway, rule))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if keep != nil && sameBindingRule(keep, &want.BindingRule) {
		return nil
	}
	rule := want.BindingRule
	rule.Partition = m.cfg.Naming.Partition
	op, write := "create", m.cfg.Client.ACL().BindingRuleCreate
	if keep != nil {
		rule.ID, op, write = keep.ID, "update", m.cfg.Client.ACL().BindingRuleUpdate
	}
	_, _, err := write(&rule, m.write(ctx))
	countWrite("binding-rule", op, err)
	if err != nil {
		return classify(err, op+" ACL binding rule of auth method "+want.BindingRule.AuthMethod)
	}
	klog.FromContext(ctx).V(2).Info("Wrote gateway ACL binding rule", "gateway", want.Gateway, "authMethod", rule.AuthMethod, "selector", rule.Selector, "operation", op)
	return nil
}

func sameBindingRule(have, want *consulapi.ACLBindingRule) bool {
	return have.Description == want.Description && have.AuthMethod == want.AuthMethod && have.Selector == want.Selector &&
		have.BindType == want.BindType && have.BindName == want.BindName && have.BindVars == nil
}

// remove deletes the Gateway's objects of ours: the binding rules first, so no new
// login gets the role while it goes, then the role, then its policy.
func (m *Manager) remove(ctx context.Context, key cache.ObjectName, rules []*consulapi.ACLBindingRule) error {
	var errs []error
	for _, rule := range rules {
		errs = append(errs, m.deleteBindingRule(ctx, key, rule))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	name, description := m.cfg.Namer.Name(key), m.cfg.Namer.Description(key)
	role, _, err := m.cfg.Client.ACL().RoleReadByName(name, m.query(ctx))
	if err != nil {
		return classify(err, "read ACL role "+name)
	}
	if role != nil && role.Description == description {
		_, err := m.cfg.Client.ACL().RoleDelete(role.ID, m.write(ctx))
		countWrite("role", "delete", err)
		if err != nil {
			return classify(err, "delete ACL role "+name)
		}
		klog.FromContext(ctx).V(2).Info("Deleted gateway ACL role", "gateway", key, "role", name)
	}
	policy, _, err := m.cfg.Client.ACL().PolicyReadByName(name, m.query(ctx))
	if err != nil {
		return classify(err, "read ACL policy "+name)
	}
	if policy != nil && policy.Description == description {
		_, err := m.cfg.Client.ACL().PolicyDelete(policy.ID, m.write(ctx))
		countWrite("policy", "delete", err)
		if err != nil {
			return classify(err, "delete ACL policy "+name)
		}
		klog.FromContext(ctx).V(2).Info("Deleted gateway ACL policy", "gateway", key, "policy", name)
	}
	return nil
}

func (m *Manager) deleteBindingRule(ctx context.Context, key cache.ObjectName, rule *consulapi.ACLBindingRule) error {
	_, err := m.cfg.Client.ACL().BindingRuleDelete(rule.ID, m.write(ctx))
	countWrite("binding-rule", "delete", err)
	if err != nil {
		return classify(err, "delete ACL binding rule "+rule.ID)
	}
	klog.FromContext(ctx).V(2).Info("Deleted gateway ACL binding rule", "gateway", key, "authMethod", rule.AuthMethod, "id", rule.ID)
	return nil
}

// ownedBindingRules are the binding rules of every auth method that this controller
// wrote for the Gateway, oldest first.
func (m *Manager) ownedBindingRules(ctx context.Context, key cache.ObjectName) ([]*consulapi.ACLBindingRule, error) {
	all, _, err := m.cfg.Client.ACL().BindingRuleList("", m.query(ctx))
	if err != nil {
		return nil, classify(err, "list ACL binding rules")
	}
	var ours []*consulapi.ACLBindingRule
	for _, rule := range all {
		if owner, ok := m.cfg.Namer.OwnerOf(rule.Description); ok && owner == key {
			ours = append(ours, rule)
		}
	}
	slices.SortFunc(ours, func(a, b *consulapi.ACLBindingRule) int { return cmp.Compare(a.CreateIndex, b.CreateIndex) })
	return ours, nil
}

func notOurs(kind, name string) error {
	return problemError{msg: fmt.Sprintf("Consul already has an ACL %s named %q that this controller did not write; it is left alone, and the gateway pods get no identity until it is removed", kind, name)}
}

func countWrite(object, op string, err error) {
	metrics.ConsulACLWrites.WithLabelValues(object, op, metrics.Result(err)).Inc()
}

// aclList is one of the ACL lists a blocking query watches: its answer names the
// Gateways of the objects of ours it holds, and says which objects changed.
type aclList struct {
	name  string
	query func(q *consulapi.QueryOptions) (objects []aclObject, meta *consulapi.QueryMeta, err error)
}

// aclObject is one entry of an ACL list: its description names its owner when it is
// ours; its ID and ModifyIndex change when it is replaced or edited.
type aclObject struct {
	id, description string
	modifyIndex     uint64
}

func (m *Manager) lists() []aclList {
	acl := m.cfg.Client.ACL()
	return []aclList{
		{"policies", func(q *consulapi.QueryOptions) ([]aclObject, *consulapi.QueryMeta, error) {
			list, meta, err := acl.PolicyList(q)
			out := make([]aclObject, 0, len(list))
			for _, p := range list {
				out = append(out, aclObject{id: p.ID, description: p.Description, modifyIndex: p.ModifyIndex})
			}
			return out, meta, err
		}},
		{"roles", func(q *consulapi.QueryOptions) ([]aclObject, *consulapi.QueryMeta, error) {
			list, meta, err := acl.RoleList(q)
			out := make([]aclObject, 0, len(list))
			for _, r := range list {
				out = append(out, aclObject{id: r.ID, description: r.Description, modifyIndex: r.ModifyIndex})
			}
			return out, meta, err
		}},
		// An auth method that appears may be the one a Gateway waits for; none is ours.
		{"auth methods", func(q *consulapi.QueryOptions) ([]aclObject, *consulapi.QueryMeta, error) {
			list, meta, err := acl.AuthMethodList(q)
			out := make([]aclObject, 0, len(list))
			for _, a := range list {
				out = append(out, aclObject{id: a.Name, modifyIndex: a.ModifyIndex})
			}
			return out, meta, err
		}},
		{"binding rules", func(q *consulapi.QueryOptions) ([]aclObject, *consulapi.QueryMeta, error) {
			list, meta, err := acl.BindingRuleList("", q)
			out := make([]aclObject, 0, len(list))
			for _, r := range list {
				out = append(out, aclObject{id: r.ID, description: r.Description, modifyIndex: r.ModifyIndex})
			}
			return out, meta, err
		}},
	}
}

// aclWatchWait is how long one blocking query on an ACL list may wait for a change.
const aclWatchWait = 10 * time.Second

// watch follows one ACL list: its first answer brings back every Gateway known and
// those whose objects of ours outlived them (they went while no leader ran); each
// later change only the Gateways whose objects in the list changed, came or went, so
// a hand edit or deletion is put back without a sync of every other Gateway (each a
// few consistent reads), and the Gateways with a problem when an object that is not
// ours changed (one in the way may be gone, an auth method awaited may have come).
func (m *Manager) watch(ctx context.Context, list aclList) {
	logger := klog.FromContext(ctx).WithName("identity")
	var index uint64
	var last aclSnapshot
	for ctx.Err() == nil {
		opts := (&consulapi.QueryOptions{WaitIndex: index, WaitTime: aclWatchWait, Partition: m.cfg.Naming.Partition}).WithContext(ctx)
		objects, meta, err := list.query(opts)
		if err != nil {
			if ctx.Err() == nil {
				logger.V(4).Info("ACL watch failed; retrying", "list", list.name, "err", err)
				select {
				case <-ctx.Done():
				case <-time.After(5 * time.Second):
				}
			}
			continue
		}
		if meta.LastIndex != index {
			now := m.snapshot(objects)
			m.enqueueChanged(last, now)
			last = now
		}
		index = meta.LastIndex
	}
}

// aclSnapshot is what one answer of an ACL list holds, as far as the watch cares.
type aclSnapshot struct {
	// owned says, per Gateway, which of its objects the list holds (ID and
	// ModifyIndex of each, in list order); nil before the first answer.
	owned map[cache.ObjectName]string
	// foreign is the same of the objects that are not ours.
	foreign string
}

// snapshot records objects by owner.
func (m *Manager) snapshot(objects []aclObject) aclSnapshot {
	s := aclSnapshot{owned: map[cache.ObjectName]string{}}
	var foreign strings.Builder
	for _, o := range objects {
		version := fmt.Sprintf("%s@%d;", o.id, o.modifyIndex)
		owner, ok := m.cfg.Namer.OwnerOf(o.description)
		if !ok {
			foreign.WriteString(version)
			continue
		}
		s.owned[owner] += version
	}
	s.foreign = foreign.String()
	return s
}

// enqueueChanged queues the Gateways whose identity may have changed from last to
// now: every one known, and every one an object of ours names, on the first answer;
// later those whose objects changed, and those with a problem when an object not
// ours did.
func (m *Manager) enqueueChanged(last, now aclSnapshot) {
	for owner := range now.owned {
		m.gateways.Know(owner)
	}
	if last.owned == nil {
		for _, k := range m.gateways.Known() {
			m.queue.Add(k)
		}
		return
	}
	for owner, objects := range now.owned {
		if last.owned[owner] != objects {
			m.queue.Add(owner)
		}
	}
	for owner := range last.owned {
		if _, ok := now.owned[owner]; !ok {
			m.queue.Add(owner)
		}
	}
	if last.foreign != now.foreign {
		for _, k := range m.withProblems() {
			m.queue.Add(k)
		}
	}
}

// withProblems are the Gateways whose identity has a problem (see Problem).
func (m *Manager) withProblems() []cache.ObjectName {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]cache.ObjectName, 0, len(m.problems))
	for k := range m.problems {
		out = append(out, k)
	}
	return out
}
