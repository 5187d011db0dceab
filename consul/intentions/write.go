package intentions

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/klog/v2"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul"
	"github.com/consul-gateway-controller/consul-gateway-controller/consul/translate"
	"github.com/consul-gateway-controller/consul-gateway-controller/internal/metrics"
	"github.com/consul-gateway-controller/consul-gateway-controller/workqueue"
)

// errCASMismatch is a check-and-set that found the entry changed since it was read.
var errCASMismatch = errors.New("the service-intentions entry changed since it was read")

// sync makes dest's service-intentions entry hold exactly the sources of ours its
// routes need, by check-and-set on the entry as just read.
func (k *Keeper) sync(ctx context.Context, dest Service) error {
	k.mu.Lock()
	known, epoch := k.needs != nil, k.epoch
	want := maps.Clone(k.needs[dest])
	k.mu.Unlock()
	if !known {
		return nil // the next computation judges every destination
	}
	logger := klog.FromContext(ctx).WithValues("destination", dest)
	current, err := k.read(ctx, dest)
	if err != nil {
		return err
	}
	meta := k.cfg.Ownership.Meta(translate.Owner{Kind: "ServiceIntentions", Name: dest.Name})
	plan := PlanEntry(current, dest, want, k.marker, meta)
	if plan.ManagedElsewhere && len(want) > 0 {
		logger.V(2).Info("The destination's intentions are managed by a consul-k8s ServiceIntentions resource; allow the gateways there", "gateways", sortedKeys(want))
	}
	if len(plan.Foreign) > 0 {
		logger.V(2).Info("A source this controller did not write already names these gateways; it is left as it is", "gateways", plan.Foreign)
	}
	if !k.stillKnown(epoch) {
		return nil // Consul may have lost its data while the entry was read
	}
	w := (&consulapi.WriteOptions{Namespace: dest.Namespace, Partition: dest.Partition}).WithContext(ctx)
	var index uint64
	if current != nil {
		index = current.ModifyIndex
	}
	switch {
	case plan.Delete:
		ok, _, err := k.cfg.Client.ConfigEntries().DeleteCAS(consulapi.ServiceIntentions, dest.Name, index, w)
		return k.written(logger, "delete", ok, err, "Deleted service intentions left with no source", want)
	case plan.Entry != nil:
		op := "update"
		if current == nil {
			op = "create"
		}
		ok, _, err := k.cfg.Client.ConfigEntries().CAS(consul.Compact(plan.Entry), index, w)
		return k.written(logger, op, ok, err, "Wrote service intentions", want)
	}
	return nil
}

// stillKnown reports whether the needs of epoch are still the keeper's.
func (k *Keeper) stillKnown(epoch uint64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.needs != nil && k.epoch == epoch
}

// written counts and logs one check-and-set write.
func (k *Keeper) written(logger klog.Logger, op string, ok bool, err error, msg string, gateways map[Service]bool) error {
	result := metrics.ResultOK
	switch {
	case err != nil:
		result = metrics.ResultError
	case !ok:
		result = metrics.ResultConflict
	}
	metrics.ConsulWrites.WithLabelValues(consulapi.ServiceIntentions, op, result).Inc()
	if err != nil {
		return fmt.Errorf("%s service-intentions: %w", op, err)
	}
	if !ok {
		return workqueue.Expected(errCASMismatch)
	}
	logger.V(2).Info(msg, "gateways", sortedKeys(gateways))
	return nil
}

// read returns dest's service-intentions entry, nil when Consul has none.
func (k *Keeper) read(ctx context.Context, dest Service) (*consulapi.ServiceIntentionsConfigEntry, error) {
	q := (&consulapi.QueryOptions{Namespace: dest.Namespace, Partition: dest.Partition, RequireConsistent: true}).WithContext(ctx)
	entry, _, err := k.cfg.Client.ConfigEntries().Get(consulapi.ServiceIntentions, dest.Name, q)
	var status consulapi.StatusError
	if errors.As(err, &status) && status.Code == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the service-intentions of %s: %w", dest, err)
	}
	intentions, ok := entry.(*consulapi.ServiceIntentionsConfigEntry)
	if !ok {
		return nil, fmt.Errorf("read the service-intentions of %s: Consul answered a %T", dest, entry)
	}
	return intentions, nil
}
