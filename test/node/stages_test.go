package node

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// The test binary plays each process of a container's start, chosen by roleEnv:
//
//	runtime    root, in a network namespace of its own: brings its loopback up, writes
//	           the pod's sysctls and execs setpriv with the container's creds, as
//	           runc does once the namespaces are made;
//	init       a copy of the binary without file capabilities, exec'd by setpriv: the
//	           image's entrypoint (dumb-init), which execs consul-dataplane;
//	dataplane  a copy carrying consul-dataplane's file capability: reports the
//	           process's credentials and which of the container's ports it can bind,
//	           as Envoy binds the listeners' ports.
const (
	roleEnv   = "NODE_TEST_ROLE"
	configEnv = "NODE_TEST_CONFIG"
)

// stageConfig is what the roles need, passed in configEnv.
type stageConfig struct {
	Creds     creds
	Setpriv   string
	Init      string
	Dataplane string
	Ports     []int32
}

// report is what the dataplane role found, as the kernel says it.
type report struct {
	UID, GID   int64
	Bounding   []string
	Effective  []string
	NoNewPrivs bool
	// Bound says, per port, "ok" or why bind(2) failed.
	Bound map[int32]string
}

func TestMain(m *testing.M) {
	role := os.Getenv(roleEnv)
	if role == "" {
		os.Exit(m.Run())
	}
	var cfg stageConfig
	if err := json.Unmarshal([]byte(os.Getenv(configEnv)), &cfg); err != nil {
		fail(role, fmt.Errorf("read %s: %w", configEnv, err))
	}
	var err error
	switch role {
	case "runtime":
		err = runtimeRole(cfg)
	case "init":
		err = execRole(cfg.Dataplane, "dataplane")
	case "dataplane":
		err = dataplaneRole(cfg)
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fail(role, err)
	}
	os.Exit(0)
}

// fail ends a role with the exit status a shell gives a command it cannot exec.
func fail(role string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", role, err)
	os.Exit(126)
}

func runtimeRole(cfg stageConfig) error {
	if err := loopbackUp(); err != nil {
		return fmt.Errorf("bring the loopback up: %w", err)
	}
	for name, value := range cfg.Creds.Sysctls {
		path := filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/"))
		if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
			return fmt.Errorf("sysctl %s=%s: %w", name, value, err)
		}
	}
	args := append([]string{"setpriv"}, setprivArgs(cfg.Creds)...)
	args = append(args, cfg.Init)
	return syscall.Exec(cfg.Setpriv, args, roleEnviron("init"))
}

// execRole execs path as the given role, keeping the configuration.
func execRole(path, role string) error {
	if err := syscall.Exec(path, []string{filepath.Base(path)}, roleEnviron(role)); err != nil {
		return fmt.Errorf("exec %s: %w", path, err)
	}
	return nil
}

func roleEnviron(role string) []string {
	return []string{roleEnv + "=" + role, configEnv + "=" + os.Getenv(configEnv)}
}

func dataplaneRole(cfg stageConfig) error {
	r, err := readStatus()
	if err != nil {
		return err
	}
	r.Bound = map[int32]string{}
	for _, port := range cfg.Ports {
		r.Bound[port] = bindLoopback(port)
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

// bindLoopback binds a TCP socket to 127.0.0.1:port and closes it: "ok", or why not.
// Nothing listens and nothing is sent.
func bindLoopback(port int32) string {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return "socket: " + err.Error()
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Port: int(port), Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return err.Error()
	}
	return "ok"
}

// readStatus reads the process's credentials from /proc/self/status.
func readStatus() (report, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return report{}, err
	}
	defer f.Close()
	var r report
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		key, value, _ := strings.Cut(scanner.Text(), ":")
		fields := strings.Fields(value)
		if len(fields) == 0 {
			continue
		}
		switch key {
		case "Uid":
			r.UID, err = strconv.ParseInt(fields[0], 10, 64)
		case "Gid":
			r.GID, err = strconv.ParseInt(fields[0], 10, 64)
		case "CapBnd":
			r.Bounding, err = capabilitySet(fields[0])
		case "CapEff":
			r.Effective, err = capabilitySet(fields[0])
		case "NoNewPrivs":
			r.NoNewPrivs = fields[0] == "1"
		}
		if err != nil {
			return report{}, fmt.Errorf("/proc/self/status %s: %w", key, err)
		}
	}
	return r, scanner.Err()
}

// capabilitySet names the capabilities of a /proc status mask, in bit order.
func capabilitySet(hex string) ([]string, error) {
	mask, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for bit, name := range capabilityNames {
		if mask&(1<<bit) != 0 {
			out = append(out, name)
		}
	}
	return out, nil
}

// loopbackUp sets IFF_UP on lo, as the CNI loopback plugin does in a pod's network
// namespace: a new namespace's lo is down and has no 127.0.0.1 until then.
func loopbackUp() error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	// struct ifreq: the interface's name, then (in a union) its flags.
	var req struct {
		name  [syscall.IFNAMSIZ]byte
		flags uint16
		_     [22]byte
	}
	copy(req.name[:], "lo")
	for _, op := range []uintptr{syscall.SIOCGIFFLAGS, syscall.SIOCSIFFLAGS} {
		if op == syscall.SIOCSIFFLAGS {
			req.flags |= syscall.IFF_UP
		}
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), op, uintptr(unsafe.Pointer(&req))); errno != 0 {
			return errno
		}
	}
	return nil
}
