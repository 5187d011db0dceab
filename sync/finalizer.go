package sync

import (
	"encoding/json"
	"fmt"
	"slices"

	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// This file keeps a class of ours while Gateways use it: the Gateway API's
// gateway-exists finalizer, and what is done meanwhile with the Gateways of a class
// being deleted.
//
// Uninstalling deletes the class while the controller still runs (helm uninstall
// deletes it with the controller's Deployment, RBAC and the class's GatewayConfig).
// Without the finalizer the class would be gone, every Gateway of it no longer ours,
// and the controller would remove their Consul entries and workloads. With it, the
// class stays, marked for deletion, until its last Gateway is deleted.

// gatewaysExistFinalizer is the finalizer the Gateway API names for this.
const gatewaysExistFinalizer = gatewayv1.GatewayClassFinalizerGatewaysExist

// wantedFinalizers is the class's finalizers as they should be, and whether they
// differ from what it has: the finalizer while Gateways name the class (never added
// to a class being deleted: one deleted before this controller saw its Gateways
// goes), none once no Gateway names it.
func wantedFinalizers(class *gatewayv1.GatewayClass, gateways int) ([]string, bool) {
	has := slices.Contains(class.Finalizers, gatewaysExistFinalizer)
	switch {
	case gateways > 0 && !has && class.DeletionTimestamp == nil:
		return append(slices.Clone(class.Finalizers), gatewaysExistFinalizer), true
	case gateways == 0 && has:
		return slices.DeleteFunc(slices.Clone(class.Finalizers), func(f string) bool { return f == gatewaysExistFinalizer }), true
	}
	return nil, false
}

// finalizersPatch is a merge patch that sets the finalizers, on the condition that
// the class is still at resourceVersion: the list is replaced whole, so one another
// writer changed meanwhile must make it fail (409 Conflict) rather than be lost. A
// patch, not an update of the cached copy: the cache drops fields (kubectl's
// last-applied annotation) that an update would erase.
func finalizersPatch(resourceVersion string, finalizers []string) ([]byte, error) {
	if finalizers == nil {
		finalizers = []string{}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": resourceVersion,
		"finalizers":      finalizers,
	}})
	if err != nil {
		return nil, fmt.Errorf("encode the finalizers patch: %w", err)
	}
	return patch, nil
}

// heldClass reports whether class is being deleted: its Gateways, their ListenerSets
// and routes are then held as they are. Nothing is judged or published for them, so
// Consul, the gateway workloads and the objects' status keep what the last judgement
// made, whatever else goes with the class (its GatewayConfig, the controller's RBAC).
// Judging them again would see the class's parameters gone, make them Accepted=False
// and remove their entries: the very teardown the finalizer is there to prevent.
// Consul's entries of an owner that exists and is not confirmed are kept, across
// restarts too (consul.Syncer), so publishing nothing keeps them.
func heldClass(class *gatewayv1.GatewayClass) bool {
	return class != nil && class.DeletionTimestamp != nil
}

// classOfGatewayHandler enqueues the class of a Gateway that is added or deleted, and
// the old and the new class of one whose class changed: whether a class keeps its
// finalizer depends on which Gateways name it.
func (c *Controller) classOfGatewayHandler() cache.ResourceEventHandler {
	enqueue := func(obj any) {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		if gw, ok := obj.(*gatewayv1.Gateway); ok {
			c.gatewayClassQueue.Add(string(gw.Spec.GatewayClassName))
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(oldObj, newObj any) {
			before, ok1 := oldObj.(*gatewayv1.Gateway)
			after, ok2 := newObj.(*gatewayv1.Gateway)
			if ok1 && ok2 && before.Spec.GatewayClassName == after.Spec.GatewayClassName {
				return
			}
			enqueue(oldObj)
			enqueue(newObj)
		},
		DeleteFunc: enqueue,
	}
}

// heldParent reports whether any of parents, named from namespace, is a Gateway of
// ours (or a ListenerSet of one) whose class is being deleted.
func (d *decider) heldParent(parents []gatewayv1.ParentReference, namespace string) (bool, error) {
	for _, ref := range parents {
		_, class, ours, err := d.ourParent(ref, namespace)
		if err != nil {
			return false, err
		}
		if ours && heldClass(class) {
			return true, nil
		}
	}
	return false, nil
}
