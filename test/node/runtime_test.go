package node

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// capabilityNames are Linux's capabilities by bit number (linux/capability.h), as
// Kubernetes names them: without the CAP_ prefix.
var capabilityNames = []string{
	"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
	"SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW",
	"IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
	"SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD",
	"LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG",
	"WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE",
}

// runtimeDefaultCapabilities are what containerd (and CRI-O before 1.18) give a
// container that neither adds nor drops any.
var runtimeDefaultCapabilities = []string{
	"CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID",
	"SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE",
}

// imageUser is the user an image's USER names, as the runtime resolves it.
type imageUser struct{ UID, GID int64 }

// consulDataplaneUser is the user of hashicorp/consul-dataplane 1.1.13's default
// image: its Dockerfile says USER 100, and its distroless base's /etc/passwd has no
// user 100, so containerd and CRI-O run it with group 0.
var consulDataplaneUser = imageUser{UID: 100, GID: 0}

// creds are what a container runtime applies to a container's first process.
type creds struct {
	UID, GID int64
	Groups   []int64
	// Bounding is the capability bounding set, in bit order. A file capability
	// outside it cannot be exec'd (EPERM).
	Bounding []string
	// NoNewPrivs makes an exec keep no more privilege than the process had: a file
	// capability then grants nothing the caller lacked.
	NoNewPrivs bool
	// Sysctls are written in the pod's network namespace before it starts.
	Sysctls map[string]string
}

// credsFor maps a pod's and its container's securityContext onto what the kubelet
// asks of the runtime and the runtime applies (the kubelet's
// DetermineEffectiveSecurityContext and AddNoNewPrivileges, containerd's
// WithCapabilities and WithUser). Left out: seccomp, the read-only root filesystem and
// AppArmor, which restrict what the process does once it runs but not whether the
// exec succeeds or a port binds.
func credsFor(pod *corev1.PodSpec, c *corev1.Container, image imageUser) (creds, error) {
	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	sc := c.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	if sc.Privileged != nil && *sc.Privileged {
		return creds{}, errors.New("a privileged container is outside this model")
	}
	out := creds{
		UID:        firstSet(sc.RunAsUser, psc.RunAsUser, image.UID),
		GID:        firstSet(sc.RunAsGroup, psc.RunAsGroup, image.GID),
		NoNewPrivs: sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation,
		Sysctls:    map[string]string{},
	}
	// The kubelet refuses to start such a container (CreateContainerConfigError).
	if nonRoot := firstSet(sc.RunAsNonRoot, psc.RunAsNonRoot, false); nonRoot && out.UID == 0 {
		return creds{}, errors.New("runAsNonRoot and the container would run as root: the kubelet refuses to start it")
	}
	if psc.FSGroup != nil {
		out.Groups = append(out.Groups, *psc.FSGroup)
	}
	out.Groups = append(out.Groups, psc.SupplementalGroups...)
	bounding, err := boundingSet(sc.Capabilities)
	if err != nil {
		return creds{}, err
	}
	out.Bounding = bounding
	for _, s := range psc.Sysctls {
		out.Sysctls[s.Name] = s.Value
	}
	return out, nil
}

// boundingSet is containerd's reading of capabilities: the runtime's defaults, then
// add ALL, drop ALL, the added names and the dropped names, in that order.
func boundingSet(caps *corev1.Capabilities) ([]string, error) {
	set := slices.Clone(runtimeDefaultCapabilities)
	if caps == nil {
		return inBitOrder(set), nil
	}
	if slices.Contains(caps.Add, "ALL") {
		set = slices.Clone(capabilityNames)
	}
	if slices.Contains(caps.Drop, "ALL") {
		set = nil
	}
	for _, c := range caps.Add {
		name := strings.ToUpper(string(c))
		if name == "ALL" {
			continue
		}
		if !slices.Contains(capabilityNames, name) {
			return nil, fmt.Errorf("capability %q: the runtime refuses an unknown capability", c)
		}
		if !slices.Contains(set, name) {
			set = append(set, name)
		}
	}
	for _, c := range caps.Drop {
		set = slices.DeleteFunc(set, func(name string) bool { return name == strings.ToUpper(string(c)) })
	}
	return inBitOrder(set), nil
}

func inBitOrder(set []string) []string {
	out := []string{}
	for _, name := range capabilityNames {
		if slices.Contains(set, name) {
			out = append(out, name)
		}
	}
	return out
}

func firstSet[T any](container, pod *T, fallback T) T {
	switch {
	case container != nil:
		return *container
	case pod != nil:
		return *pod
	}
	return fallback
}

// setprivArgs are the arguments of util-linux's setpriv that give the program it
// runs the creds c (the sysctls are not its business).
func setprivArgs(c creds) []string {
	bounding := []string{"-all"}
	for _, name := range c.Bounding {
		bounding = append(bounding, "+"+strings.ToLower(name))
	}
	args := []string{
		fmt.Sprintf("--reuid=%d", c.UID),
		fmt.Sprintf("--regid=%d", c.GID),
		// No inheritable or ambient capabilities: containerd sets neither.
		"--inh-caps=-all",
		"--bounding-set=" + strings.Join(bounding, ","),
	}
	if len(c.Groups) == 0 {
		args = append(args, "--clear-groups")
	} else {
		groups := make([]string, len(c.Groups))
		for i, g := range c.Groups {
			groups[i] = fmt.Sprint(g)
		}
		args = append(args, "--groups="+strings.Join(groups, ","))
	}
	if c.NoNewPrivs {
		args = append(args, "--no-new-privs")
	}
	return args
}

// TestBoundingSet: containerd's order of add and drop, ALL included.
func TestBoundingSet(t *testing.T) {
	defaultsWithoutRaw := slices.DeleteFunc(inBitOrder(runtimeDefaultCapabilities), func(c string) bool { return c == "NET_RAW" })
	allButAdmin := slices.DeleteFunc(slices.Clone(capabilityNames), func(c string) bool { return c == "SYS_ADMIN" })
	for _, tt := range []struct {
		name    string
		caps    *corev1.Capabilities
		want    []string
		wantErr bool
	}{
		{"none", nil, inBitOrder(runtimeDefaultCapabilities), false},
		{"drop ALL", &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}, []string{}, false},
		{"drop ALL, add one", &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"net_bind_service"}}, []string{"NET_BIND_SERVICE"}, false},
		{"drop one", &corev1.Capabilities{Drop: []corev1.Capability{"NET_RAW"}}, defaultsWithoutRaw, false},
		{"add ALL, drop one", &corev1.Capabilities{Add: []corev1.Capability{"ALL"}, Drop: []corev1.Capability{"SYS_ADMIN"}}, allButAdmin, false},
		// containerd prefixes CAP_ itself: CAP_CAP_NET_ADMIN is no capability.
		{"prefixed name", &corev1.Capabilities{Add: []corev1.Capability{"CAP_NET_ADMIN"}}, nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := boundingSet(tt.caps)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want one: %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("bounding set (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCredsForRefusesRootWithRunAsNonRoot: the kubelet's check, which the rendered
// pod passes only through the image's numeric USER.
func TestCredsForRefusesRootWithRunAsNonRoot(t *testing.T) {
	pod := &corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: new(true)}}
	if _, err := credsFor(pod, &corev1.Container{}, imageUser{UID: 0}); err == nil {
		t.Error("runAsNonRoot with an image that runs as root: no error")
	}
	got, err := credsFor(pod, &corev1.Container{}, consulDataplaneUser)
	if err != nil || got.UID != 100 || got.GID != 0 {
		t.Errorf("runAsNonRoot with consul-dataplane's image: %+v, %v; want 100:0", got, err)
	}
}
