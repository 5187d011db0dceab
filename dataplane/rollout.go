package dataplane

import (
	"context"
	"fmt"
	gosync "sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// This file bounds how many Gateways take a new consul-dataplane image at once.
//
// An image comes from --gateway-image or the class's GatewayConfig, never from a
// Gateway (gatewayconfig.For refuses it there): a new one is a change to every
// Gateway of the class, or of the controller, which would otherwise roll all their
// Deployments at once. So an existing Deployment takes a new image only while fewer
// than the limit of Deployments are mid-roll to that image: carrying it in their pod
// template and not yet rolled out (rolledOut). The others keep the image they run
// until a place frees; everything else the Gateway asks for (its listeners, its
// replicas, its own GatewayConfig's fields) is applied at once, on the image it runs.
// A new image that never gets Ready stops the roll at the limit; with the
// Deployments' maxUnavailable 0, their old pods keep serving meanwhile. The image a
// Deployment rolls from is the one this controller last set (imageAnnotation), not
// the one it holds: a hand edit of the image is drift, put back at once, never a roll.

// DefaultImageRolloutLimit is --gateway-image-rollout-limit's default.
const DefaultImageRolloutLimit = "10%"

// rolloutRecheck is how often a Gateway held back is looked at again: the Deployment
// whose roll frees its place is another Gateway's, whose events do not bring this one.
const rolloutRecheck = 5 * time.Second

// ParseImageRolloutLimit reads a limit: a number of Deployments, or a percentage of
// this controller's gateway Deployments (rounded up); at least 1.
func ParseImageRolloutLimit(s string) (intstr.IntOrString, error) {
	limit := intstr.Parse(s)
	n, err := intstr.GetScaledValueFromIntOrPercent(&limit, 100, true)
	if err != nil {
		return limit, fmt.Errorf("%q is neither a number nor a percentage: %w", s, err)
	}
	if n < 1 {
		return limit, fmt.Errorf("%q allows no Deployment to roll", s)
	}
	return limit, nil
}

// imageRollout remembers the Gateways it let take a new image until the cache shows
// their Deployment rolled out with it: before the cache has the apply, or the
// Deployment's status, the cache alone would count them as done and let more go.
type imageRollout struct {
	limit          intstr.IntOrString
	controllerName gatewayv1.GatewayController
	deployments    appslisters.DeploymentLister

	mu      gosync.Mutex
	started map[cache.ObjectName]startedRoll
}

// startedRoll is the image a Gateway was let take, and when.
type startedRoll struct {
	image string
	at    time.Time
}

// cacheCatchUp bounds how long a Gateway let take an image may show in the cache
// without it: after that its apply is taken not to have happened (refused, or its
// Deployment withdrawn), and its place is free again.
const cacheCatchUp = 30 * time.Second

// admit reports whether the Gateway gw may move its Deployment d to image now, and
// records it if so.
func (r *imageRollout) admit(ctx context.Context, gw *gatewayv1.Gateway, d *appsv1.Deployment, image string) (bool, error) {
	all, err := r.deployments.List(labels.SelectorFromSet(map[string]string{ManagedByLabel: ManagedByValue}))
	if err != nil {
		return false, fmt.Errorf("list gateway Deployments from cache: %w", err)
	}
	ours := make(map[cache.ObjectName]*appsv1.Deployment, len(all))
	for _, other := range all {
		if other.Annotations[controllerAnnotation] == string(r.controllerName) && other.Labels[GatewayNameLabel] != "" {
			ours[cache.ObjectName{Namespace: other.Namespace, Name: other.Labels[GatewayNameLabel]}] = other
		}
	}
	limit, err := intstr.GetScaledValueFromIntOrPercent(&r.limit, len(ours), true)
	if err != nil {
		return false, err
	}
	limit = max(limit, 1)
	key := cache.MetaObjectToName(gw)

	r.mu.Lock()
	defer r.mu.Unlock()
	rolling := map[cache.ObjectName]bool{}
	for gateway, other := range ours {
		if deployedImage(other) == image && !rolledOut(other) {
			rolling[gateway] = true
		}
	}
	now := time.Now()
	for gateway, started := range r.started {
		other, ok := ours[gateway]
		carries := ok && deployedImage(other) == started.image
		if !ok || carries && rolledOut(other) || !carries && now.Sub(started.at) > cacheCatchUp {
			delete(r.started, gateway) // done, gone, or never applied
			continue
		}
		if started.image == image {
			rolling[gateway] = true
		}
	}
	logger := klog.FromContext(ctx)
	if len(rolling) >= limit {
		logger.V(4).Info("Image roll held back: as many gateway Deployments are rolling to it as the limit allows",
			"gateway", klog.KObj(gw), "deployment", klog.KObj(d), "running", deployedImage(d), "image", image, "rolling", len(rolling), "limit", limit)
		return false, nil
	}
	r.started[key] = startedRoll{image: image, at: now}
	logger.V(2).Info("Gateway Deployment takes a new image", "gateway", klog.KObj(gw), "deployment", klog.KObj(d),
		"from", deployedImage(d), "image", image, "rolling", len(rolling)+1, "limit", limit)
	return true, nil
}

// release forgets that the Gateway was let take a new image: its apply failed, and
// the place must not stay taken by a roll that did not start.
func (r *imageRollout) release(gateway cache.ObjectName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.started, gateway)
}

// imageRoll is what boundImageRoll decided for one sync.
type imageRoll int

const (
	noImageChange imageRoll = iota
	imageAdmitted           // the Deployment takes the new image now
	imageHeld               // it keeps the image it runs; look again later
)

// boundImageRoll leaves the Gateway's Deployment on the image it runs when it may not
// take the desired one yet (see imageRollout).
func (c *Controller) boundImageRoll(ctx context.Context, gw *gatewayv1.Gateway, objects Objects) (imageRoll, error) {
	desired := objects.Deployment
	image := desiredImage(desired)
	existing, err := c.cfg.Owned.Deployments.Lister().Deployments(gw.Namespace).Get(*desired.Name)
	if err != nil || !metav1.IsControlledBy(existing, gw) {
		return noImageChange, nil // none yet (nothing rolls), or not the Gateway's (never written)
	}
	applied, err := appliedImage(existing, c.cfg.FieldManager)
	if err != nil {
		return noImageChange, err
	}
	if applied == "" || applied == image {
		// Nothing of ours to roll from (a first image), or the image is ours and only
		// the template was edited by hand: drift, put back at once.
		return noImageChange, nil
	}
	admitted, err := c.rollout.admit(ctx, gw, existing, image)
	switch {
	case err != nil:
		return noImageChange, err
	case admitted:
		return imageAdmitted, nil
	}
	setImage(desired, applied)
	return imageHeld, nil
}

// appliedImage is the consul-dataplane image this controller last set in the
// Deployment: its imageAnnotation, or for a Deployment written before that annotation,
// the image field this controller's field manager owns; "" for neither. It differs
// from the image the Deployment holds after a hand edit, which is no roll.
func appliedImage(d *appsv1.Deployment, fieldManager string) (string, error) {
	if image := d.Annotations[imageAnnotation]; image != "" {
		return image, nil
	}
	owned, err := appsv1ac.ExtractDeployment(d, fieldManager)
	if err != nil {
		return "", fmt.Errorf("read the fields of Deployment %s/%s this controller manages: %w", d.Namespace, d.Name, err)
	}
	return desiredImage(owned), nil
}

// rolledOut reports whether a Deployment's controller has rolled out its current pod
// template everywhere: it has seen this generation, and every pod is of the template
// and available (kubectl rollout status's test).
func rolledOut(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	return s.ObservedGeneration >= d.Generation &&
		s.UpdatedReplicas == want && s.Replicas == s.UpdatedReplicas && s.AvailableReplicas == s.UpdatedReplicas
}

// deployedImage is the image of the consul-dataplane container in a Deployment's pod
// template; "" for none.
func deployedImage(d *appsv1.Deployment) string {
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == containerName {
			return c.Image
		}
	}
	return ""
}

func desiredImage(d *appsv1ac.DeploymentApplyConfiguration) string {
	if c := dataplaneContainer(d); c != nil && c.Image != nil {
		return *c.Image
	}
	return ""
}

func setImage(d *appsv1ac.DeploymentApplyConfiguration, image string) {
	if c := dataplaneContainer(d); c != nil {
		c.WithImage(image)
		d.WithAnnotations(map[string]string{imageAnnotation: image})
	}
}

func dataplaneContainer(d *appsv1ac.DeploymentApplyConfiguration) *corev1ac.ContainerApplyConfiguration {
	if d.Spec == nil || d.Spec.Template == nil || d.Spec.Template.Spec == nil {
		return nil
	}
	for i := range d.Spec.Template.Spec.Containers {
		if c := &d.Spec.Template.Spec.Containers[i]; c.Name != nil && *c.Name == containerName {
			return c
		}
	}
	return nil
}
