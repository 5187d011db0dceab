package testenv

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1client "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/typed/apis/v1"

	"github.com/consul-gateway-controller/consul-gateway-controller/api/v1alpha1"
)

// Create creates obj with the admin clients and fills obj in with what the API server
// stored (a generated name, the uid, defaults), failing t on an error. A Namespace,
// GatewayClass or ClusterRoleBinding is deleted when t ends; the other kinds go with
// their namespace.
func (e *Env) Create(t testing.TB, obj runtime.Object) {
	t.Helper()
	deleteFn, err := e.create(t.Context(), obj)
	if err != nil {
		t.Fatalf("create %T: %v", obj, err)
	}
	if deleteFn == nil {
		return
	}
	t.Cleanup(func() {
		if err := deleteFn(context.Background()); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete %T: %v", obj, err)
		}
	})
}

// NewNamespace creates a namespace with a name generated from prefix, deleted when t
// ends, and returns its name.
func (e *Env) NewNamespace(t testing.TB, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	e.Create(t, ns)
	return ns.Name
}

// create creates obj and returns how to delete it when its kind is not deleted with
// its namespace.
func (e *Env) create(ctx context.Context, obj runtime.Object) (deleteFn func(context.Context) error, err error) {
	core, gw, create, del := e.KubeClient.CoreV1(), e.GatewayClient.GatewayV1(), metav1.CreateOptions{}, metav1.DeleteOptions{}
	switch o := obj.(type) {
	case *corev1.Namespace:
		err = into(o)(core.Namespaces().Create(ctx, o, create))
		deleteFn = func(ctx context.Context) error { return core.Namespaces().Delete(ctx, o.Name, del) }
	case *corev1.Secret:
		err = into(o)(core.Secrets(o.Namespace).Create(ctx, o, create))
	case *corev1.Service:
		err = into(o)(core.Services(o.Namespace).Create(ctx, o, create))
	case *corev1.ServiceAccount:
		err = into(o)(core.ServiceAccounts(o.Namespace).Create(ctx, o, create))
	case *corev1.Pod:
		err = into(o)(core.Pods(o.Namespace).Create(ctx, o, create))
	case *appsv1.Deployment:
		err = into(o)(e.KubeClient.AppsV1().Deployments(o.Namespace).Create(ctx, o, create))
	case *policyv1.PodDisruptionBudget:
		err = into(o)(e.KubeClient.PolicyV1().PodDisruptionBudgets(o.Namespace).Create(ctx, o, create))
	case *rbacv1.ClusterRole:
		rbac := e.KubeClient.RbacV1().ClusterRoles()
		err = into(o)(rbac.Create(ctx, o, create))
		deleteFn = func(ctx context.Context) error { return rbac.Delete(ctx, o.Name, del) }
	case *rbacv1.ClusterRoleBinding:
		rbac := e.KubeClient.RbacV1().ClusterRoleBindings()
		err = into(o)(rbac.Create(ctx, o, create))
		deleteFn = func(ctx context.Context) error { return rbac.Delete(ctx, o.Name, del) }
	case *gatewayv1.GatewayClass:
		err = into(o)(gw.GatewayClasses().Create(ctx, o, create))
		deleteFn = func(ctx context.Context) error { return deleteGatewayClass(ctx, gw, o.Name) }
	case *gatewayv1.Gateway:
		err = into(o)(gw.Gateways(o.Namespace).Create(ctx, o, create))
	case *gatewayv1.ListenerSet:
		err = into(o)(gw.ListenerSets(o.Namespace).Create(ctx, o, create))
	case *gatewayv1.HTTPRoute:
		err = into(o)(gw.HTTPRoutes(o.Namespace).Create(ctx, o, create))
	case *gatewayv1.TCPRoute:
		err = into(o)(gw.TCPRoutes(o.Namespace).Create(ctx, o, create))
	case *gatewayv1.GRPCRoute:
		err = into(o)(gw.GRPCRoutes(o.Namespace).Create(ctx, o, create))
	case *gatewayv1.TLSRoute:
		err = into(o)(gw.TLSRoutes(o.Namespace).Create(ctx, o, create))
	case *gatewayv1.UDPRoute:
		err = into(o)(gw.UDPRoutes(o.Namespace).Create(ctx, o, create))
	case *gatewayv1.ReferenceGrant:
		err = into(o)(gw.ReferenceGrants(o.Namespace).Create(ctx, o, create))
	case *v1alpha1.GatewayConfig:
		err = into(o)(e.ConfigClient.GatewayConfigs(o.Namespace).Create(ctx, o, create))
	default:
		return nil, fmt.Errorf("testenv cannot create a %T", obj)
	}
	if err != nil {
		return nil, err
	}
	return deleteFn, nil
}

// into returns a function that takes a typed client's answer to a create and copies
// the stored object into obj.
func into[T any](obj *T) func(*T, error) error {
	return func(stored *T, err error) error {
		if err == nil {
			*obj = *stored
		}
		return err
	}
}

// Update reads the object name with get, applies edit to it and writes it with update
// (a typed client's Update or UpdateStatus), from a fresh read again on a conflict, as
// a user's edit does while controllers write the object; it fails t on any other error
// and returns the object written.
func Update[T any](t testing.TB, get func(context.Context, string, metav1.GetOptions) (T, error),
	update func(context.Context, T, metav1.UpdateOptions) (T, error), name string, edit func(T)) T {
	t.Helper()
	var written T
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		edit(obj)
		written, err = update(t.Context(), obj, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("update %s: %v", name, err)
	}
	return written
}

// deleteGatewayClass deletes a class and then takes off the gateway-exists finalizer a
// controller may have left on it, as an operator does once no controller serves the
// class: a test stops its controller before its Gateways go, and the class would
// otherwise stay, being deleted, for good.
func deleteGatewayClass(ctx context.Context, gw gatewayv1client.GatewayV1Interface, name string) error {
	if err := gw.GatewayClasses().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	_, err := gw.GatewayClasses().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
