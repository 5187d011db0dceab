package identity

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/metrics"
)

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
