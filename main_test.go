package main

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/consul-gateway-controller/consul-gateway-controller/internal/buildinfo"
)

// runBeside returns only once every part has returned, with all their errors, the
// primary part's first: a deposed leader's writers must all have stopped before the
// Lease is released.
func TestRunBesideWaitsForEveryPart(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	errPrimary, errFirst, errSecond := errors.New("primary"), errors.New("first"), errors.New("second")
	var stopped atomic.Int32
	other := func(err error) func(context.Context) error {
		return func(ctx context.Context) error {
			<-ctx.Done()
			stopped.Add(1)
			return err
		}
	}
	primary := func(context.Context) error {
		cancel()
		return errPrimary
	}
	err := runBeside(ctx, primary, other(errFirst), other(nil), other(errSecond))
	if got := stopped.Load(); got != 3 {
		t.Errorf("%d of 3 parts had stopped when runBeside returned", got)
	}
	want := errors.Join(errPrimary, errFirst, errSecond).Error()
	if err == nil || err.Error() != want {
		t.Errorf("runBeside: %v, want %q", err, want)
	}
}

// The version command prints the build's line and takes no arguments.
func TestPrintVersion(t *testing.T) {
	var out, errOut strings.Builder
	if code := printVersion(nil, &out, &errOut); code != 0 || out.String() != buildinfo.Read().String()+"\n" {
		t.Errorf("printVersion() = %d, %q; want 0 and %q", code, out.String(), buildinfo.Read().String()+"\n")
	}
	if code := printVersion([]string{"--short"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "takes no arguments") {
		t.Errorf("printVersion(--short) = %d, stderr %q; want 2 and why", code, errOut.String())
	}
}
