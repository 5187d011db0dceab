package main

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/consul-gateway-controller/consul-gateway-controller/test/testenv"
)

// TestSecureStackPrintsCommandsThatWork starts `make run-local LOCAL_FLAGS=-secure`'s
// stack (Consul with ACLs, default deny, and TLS only) and runs the status, explain
// and collect command lines it prints, copied as printed, through a shell: each must
// answer (exit 0) with Consul's part, which takes the CA file and the read-only
// token file the stack wrote. (Before they were written, status answered "x509:
// certificate signed by unknown authority".)
func TestSecureStackPrintsCommandsThatWork(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var printed strings.Builder
	o := localOptions{stateDir: filepath.Join(t.TempDir(), "local"), controller: testenv.ControllerBinary(t),
		examples: filepath.Join(root, "examples"), verbosity: 2, secure: true}
	s, err := start(t.Context(), o, &printed, io.Discard)
	if s != nil {
		defer s.stop(io.Discard)
	}
	if err != nil {
		t.Fatalf("start: %v\n%s", err, printed.String())
	}
	commands := map[string]string{}
	for line := range strings.Lines(printed.String()) {
		for _, command := range []string{"status", "explain", "collect"} {
			if strings.HasPrefix(strings.TrimSpace(line), o.controller+" "+command+" ") {
				commands[command] = strings.TrimSpace(line)
			}
		}
	}
	if len(commands) != 3 {
		t.Fatalf("the stack printed %d of the status, explain and collect commands:\n%s", len(commands), printed.String())
	}
	// The example's gateway pods run on a node kwok fakes, whose address is not on
	// loopback: a log read would make the API server dial it.
	if !strings.Contains(commands["collect"], " --pod-logs=false ") {
		t.Fatalf("the printed collect reads the pods' logs; not run: %s", commands["collect"])
	}
	shell := func(line string) (string, error) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "sh", "-c", line).CombinedOutput()
		return string(out), err
	}
	// Copied as printed, the status command answers; once the controller has
	// converged, with Consul's verdict on the example's route.
	var out string
	testenv.Eventually(t, 90*time.Second, "status shows Consul's verdict on demo/echo", func(context.Context) error {
		if out, err = shell(commands["status"]); err != nil {
			t.Fatalf("%s: %v\n%s", commands["status"], err, out)
		}
		if !strings.Contains(out, "http-route echo.demo Accepted=True") {
			return fmt.Errorf("no verdict yet:\n%s", out)
		}
		return nil
	})
	t.Logf("%s\n%s", commands["status"], out)
	for _, command := range []string{"explain", "collect"} {
		out, err := shell(commands[command])
		if err != nil {
			t.Errorf("%s: %v\n%s", commands[command], err, out)
		}
		t.Logf("%s\n%s", commands[command], out)
	}
}
