package identity

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	gosync "sync"

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
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/gatewayconfig"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
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
	gateways *contract.AcceptedGateways

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
		gateways:  contract.NewAcceptedGateways(),
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
func (m *Manager) Publish(_ context.Context, c contract.Confirmation) {
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
	config, problem, err := gatewayconfig.For(m.cfg.Configs, gw, class)
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
