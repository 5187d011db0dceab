package testenv

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CommandRun is how one run of a controller binary's command ended.
type CommandRun struct {
	Code           int
	Stdout, Stderr string
}

// RunCommand runs the controller binary (ControllerBinary) with args, for at most two
// minutes, and returns its exit code and output; a run that could not start fails t.
func RunCommand(t testing.TB, args ...string) CommandRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, ControllerBinary(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%v: %v", args, err)
	}
	return CommandRun{Code: cmd.ProcessState.ExitCode(), Stdout: stdout.String(), Stderr: stderr.String()}
}

// ClosedLoopbackAddr is a loopback host:port where nothing listens: a server that is
// down.
func ClosedLoopbackAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// UnscheduledPod is a pod no scheduler takes: it never gets a node or an address, so
// the API server answers its log with nothing and refuses to proxy to it, without
// dialing anything (kwok's node and pod addresses are not on loopback: never ask the
// API server for the log of a pod on them, or to proxy to one).
func UnscheduledPod(namespace, name string, labels map[string]string, container string, ports ...corev1.ContainerPort) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			SchedulerName: "no-such-scheduler",
			Containers:    []corev1.Container{{Name: container, Image: "registry.invalid/" + container + ":test", Ports: ports}},
		},
	}
}

// ReadTarGz reads the regular files of a gzipped tar into their contents, by name.
func ReadTarGz(t testing.TB, file string) map[string]string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name] = string(data)
	}
}
