package dataplane

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestParseImageRolloutLimit(t *testing.T) {
	for s, ok := range map[string]bool{"1": true, "10%": true, "100%": true, "0": false, "0%": false, "-1": false, "ten": false, "": false} {
		if _, err := ParseImageRolloutLimit(s); (err == nil) != ok {
			t.Errorf("ParseImageRolloutLimit(%q): %v, want ok %v", s, err, ok)
		}
	}
}

// rolloutDeployment is the Deployment of Gateway ns/name on image; rolled says
// whether its roll is done.
func rolloutDeployment(name, image string, rolled bool) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name + "-consul", Generation: 2,
			Labels:      map[string]string{ManagedByLabel: ManagedByValue, GatewayNameLabel: name},
			Annotations: map[string]string{controllerAnnotation: "example.com/ours"}},
		Spec: appsv1.DeploymentSpec{Replicas: new(int32(2)), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: containerName, Image: image}}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 1, AvailableReplicas: 2},
	}
	if rolled {
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2}
	}
	return d
}

// At most limit Deployments roll to an image at once: those the cache shows on it and
// not rolled out, and those admitted whose apply the cache has not shown yet.
func TestImageRolloutAdmits(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, d := range []*appsv1.Deployment{
		rolloutDeployment("a", "new", false), // rolling
		rolloutDeployment("b", "old", true),
		rolloutDeployment("c", "old", true),
		rolloutDeployment("d", "old", true),
	} {
		if err := indexer.Add(d); err != nil {
			t.Fatal(err)
		}
	}
	r := &imageRollout{limit: intstr.FromString("50%"), controllerName: "example.com/ours",
		deployments: appslisters.NewDeploymentLister(indexer), started: map[cache.ObjectName]startedRoll{}}
	gw := func(name string) *gatewayv1.Gateway {
		return &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name}}
	}
	admit := func(name string) bool {
		ok, err := r.admit(t.Context(), gw(name), rolloutDeployment(name, "old", true), "new")
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	// 50% of 4 is 2: a is rolling, b may go; c waits for b, whose apply the cache has
	// not shown yet.
	if !admit("b") || admit("c") {
		t.Fatalf("admitted %v, want b alone", r.started)
	}
	// b rolled out: c may go.
	if err := indexer.Update(rolloutDeployment("b", "new", true)); err != nil {
		t.Fatal(err)
	}
	if !admit("c") || admit("d") {
		t.Fatalf("after b rolled out: admitted %v, want c and not d", r.started)
	}
	// c's apply never showed in the cache (refused): its place frees after a while.
	c := cache.ObjectName{Namespace: "apps", Name: "c"}
	r.started[c] = startedRoll{image: "new", at: time.Now().Add(-2 * cacheCatchUp)}
	if !admit("d") {
		t.Fatalf("c's stale place still taken: %v", r.started)
	}
}

func TestRolledOut(t *testing.T) {
	d := rolloutDeployment("a", "new", true)
	if !rolledOut(d) {
		t.Error("a rolled-out Deployment is not")
	}
	d.Generation = 3
	if rolledOut(d) {
		t.Error("a generation the Deployment controller has not seen counts as rolled out")
	}
	if rolledOut(rolloutDeployment("a", "new", false)) {
		t.Error("a Deployment with an old pod left counts as rolled out")
	}
}

// The image a Deployment rolls from is the one this controller last set: its
// annotation, or, on a Deployment written before the annotation, the image field this
// controller's field manager owns. A hand edit changes neither.
func TestAppliedImage(t *testing.T) {
	const ours = "consul-gateway-controller"
	ownsImage := metav1.ManagedFieldsEntry{Manager: ours, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "apps/v1", FieldsType: "FieldsV1",
		FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"consul-dataplane\"}":{".":{},"f:name":{},"f:image":{}}}}}}}`)}
	ownsName := ownsImage
	ownsName.FieldsV1 = metav1.NewFieldsV1(`{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"consul-dataplane\"}":{".":{},"f:name":{}}}}}}}`)
	for _, tc := range []struct {
		name        string
		annotation  string
		owned       metav1.ManagedFieldsEntry
		handEdited  bool
		wantApplied string
	}{
		{name: "annotated, hand edited", annotation: "example.com/dataplane:1", owned: ownsName, handEdited: true, wantApplied: "example.com/dataplane:1"},
		{name: "written before the annotation", owned: ownsImage, wantApplied: "example.com/dataplane:1"},
		{name: "written before the annotation, hand edited", owned: ownsName, handEdited: true, wantApplied: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := rolloutDeployment("edge", "example.com/dataplane:1", true)
			if tc.annotation != "" {
				d.Annotations[imageAnnotation] = tc.annotation
			}
			if tc.handEdited {
				d.Spec.Template.Spec.Containers[0].Image = "example.com/hand-edited:1"
			}
			d.ManagedFields = []metav1.ManagedFieldsEntry{tc.owned}
			got, err := appliedImage(d, ours)
			if err != nil || got != tc.wantApplied {
				t.Errorf("appliedImage: %q, %v; want %q", got, err, tc.wantApplied)
			}
		})
	}
}
