package main

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/consul/identity"
	"github.com/consul-gateway-controller/consul-gateway-controller/dataplane"
	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
)

// gatewayOfObject calls enqueue with the Gateway an owned object is labelled with.
func gatewayOfObject(enqueue func(gateway cache.ObjectName)) cache.ResourceEventHandlerFuncs {
	mapped := func(obj any) {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		object, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		if name := object.GetLabels()[gatewayv1.GatewayNameLabelKey]; name != "" {
			enqueue(cache.ObjectName{Namespace: object.GetNamespace(), Name: name})
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    mapped,
		UpdateFunc: func(_, newObj any) { mapped(newObj) },
		DeleteFunc: mapped,
	}
}

// withIdentities is the data plane's state, where pods that cannot get their identity
// in Consul are a problem of the data plane too: they cannot log in, so they serve
// nothing.
type withIdentities struct {
	*dataplane.Controller
	identities *identity.Manager
}

func (w withIdentities) State(gw *gatewayv1.Gateway) contract.DeploymentState {
	state := w.Controller.State(gw)
	if state.Problem == "" {
		if problem := w.identities.Problem(cache.MetaObjectToName(gw)); problem != "" {
			state.Problem = "Gateway pods cannot log in to Consul: " + problem
		}
	}
	return state
}
