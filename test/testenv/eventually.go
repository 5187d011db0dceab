package testenv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// PollInterval is how often Eventually checks.
const PollInterval = 100 * time.Millisecond

// Poll calls check every interval, the first time at once, until it returns nil, and
// returns nil then. When timeout passes or ctx ends first, it returns check's last
// error: a check cut short by the deadline says nothing, so the one before it is kept.
// Checks that cannot fail a test (the chaos suite's convergence, the bench) poll with
// it; Eventually is the form for a test. A watched server's crash ends it at once.
func Poll(ctx context.Context, interval, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	last := errors.New("not checked")
	for {
		if msg := crashed(); msg != "" {
			return errors.New(msg)
		}
		err := check(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() == nil && !cutShort(err) {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not within %s: %w", timeout, last)
		case <-tick.C:
		}
	}
}

// Eventually polls check every PollInterval until it returns nil, and fails t with
// what and check's last error when timeout passes first. check gets a context that
// ends with the timeout or the test.
func Eventually(t testing.TB, timeout time.Duration, what string, check func(context.Context) error) {
	t.Helper()
	if err := Poll(t.Context(), PollInterval, timeout, check); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// cutShort reports whether err is a client's refusal to start a request that the
// deadline would cut: client-go's rate limiter says so before the context ends, in
// words only (golang.org/x/time/rate wraps no context error).
func cutShort(err error) bool {
	return strings.Contains(err.Error(), "would exceed context deadline")
}

// Consistently checks every PollInterval for duration that check returns nil, and
// fails t with what and check's error the first time it does not.
func Consistently(t testing.TB, duration time.Duration, what string, check func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), duration)
	defer cancel()
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	for {
		if err := check(ctx); err != nil && ctx.Err() == nil {
			t.Fatalf("%s: %v", what, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// ConditionReason is "Status/Reason" of the condition of condType in conds, and ""
// when there is none: the form tests compare conditions in.
func ConditionReason(conds []metav1.Condition, condType string) string {
	c := meta.FindStatusCondition(conds, condType)
	if c == nil {
		return ""
	}
	return string(c.Status) + "/" + c.Reason
}

// ConditionText is "Status/Reason: message" of the condition of condType in conds,
// and "none" when there is none: the form tests compare messages in.
func ConditionText(conds []metav1.Condition, condType string) string {
	c := meta.FindStatusCondition(conds, condType)
	if c == nil {
		return "none"
	}
	return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
}

// ConditionTrue returns nil when the condition of condType in conds is True, and an
// error saying what it is otherwise.
func ConditionTrue(conds []metav1.Condition, condType string) error {
	c := meta.FindStatusCondition(conds, condType)
	switch {
	case c == nil:
		return fmt.Errorf("no %s condition", condType)
	case c.Status != metav1.ConditionTrue:
		return fmt.Errorf("%s %s/%s: %s", condType, c.Status, c.Reason, c.Message)
	}
	return nil
}

// ParentOf is the first status entry of controller among a route's parents, or nil.
func ParentOf(parents []gatewayv1.RouteParentStatus, controller gatewayv1.GatewayController) *gatewayv1.RouteParentStatus {
	for i := range parents {
		if parents[i].ControllerName == controller {
			return &parents[i]
		}
	}
	return nil
}

// Tail is the last lines of text (a process log), for failure messages.
func Tail(text string, lines int) string {
	all := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
