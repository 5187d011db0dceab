// Package node proves on this machine's kernel what a node does with a gateway pod:
// the container's securityContext, mapped onto what a container runtime applies
// (bounding set, no_new_privs, user, the pod's sysctls), lets the image's entrypoint
// exec consul-dataplane, which carries a file capability, and lets Envoy bind the
// listeners' ports. Its tests need root, as a container runtime does.
package node
