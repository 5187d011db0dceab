package dataplane

import (
	"strconv"
	"strings"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// On SIGTERM consul-dataplane keeps Envoy serving for shutdownGracePeriod, while the
// pod leaves its Service's endpoints and the load balancers, then stops it. The pod's
// grace period leaves Envoy's exit time on top (the kubelet kills what is left).
const (
	shutdownGracePeriodSeconds    = 15
	terminationGracePeriodSeconds = 30
)

// gracefulShutdownFlag reports whether consul-dataplane of image has
// -shutdown-grace-period-seconds and acts on SIGTERM with it: 1.0.4 and later of 1.0,
// 1.1.3 and later of 1.1, and every release from 1.2 (read in its sources, tags
// v1.0.4 and v1.1.3). Older ones refuse the flag and exit. An image whose tag is not
// a version (a digest, "latest", a build of one's own) is taken to be a current one.
func gracefulShutdownFlag(image string) bool {
	v, err := utilversion.ParseGeneric(imageTag(image))
	if err != nil || v.Major() != 1 {
		return true
	}
	switch v.Minor() {
	case 0:
		return v.Patch() >= 4
	case 1:
		return v.Patch() >= 3
	}
	return true
}

// imageTag is the tag of an image reference: what follows the last ":" after the
// last "/" (a registry's port is before it), without a digest; "" for none.
func imageTag(image string) string {
	image, _, _ = strings.Cut(image, "@")
	name := image[strings.LastIndex(image, "/")+1:]
	_, tag, _ := strings.Cut(name, ":")
	return tag
}

// shutdownArgs keep Envoy serving after SIGTERM, where consul-dataplane can.
func shutdownArgs(image string) []string {
	if !gracefulShutdownFlag(image) {
		return nil
	}
	return []string{"-shutdown-grace-period-seconds=" + strconv.Itoa(shutdownGracePeriodSeconds)}
}

// preStop holds SIGTERM back for as long where consul-dataplane cannot: the kubelet's
// own sleep (Kubernetes 1.30 and later; the image has no sleep binary to exec), while
// Envoy serves on and the pod leaves the endpoints.
func preStop(image string) *corev1ac.LifecycleApplyConfiguration {
	if gracefulShutdownFlag(image) {
		return nil
	}
	return corev1ac.Lifecycle().WithPreStop(corev1ac.LifecycleHandler().
		WithSleep(corev1ac.SleepAction().WithSeconds(shutdownGracePeriodSeconds)))
}
