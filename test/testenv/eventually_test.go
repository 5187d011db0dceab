package testenv

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPollReturnsOnceTheCheckPasses(t *testing.T) {
	calls := 0
	err := Poll(t.Context(), time.Millisecond, time.Minute, func(context.Context) error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("Poll = %v after %d checks, want nil after 3", err, calls)
	}
}

// A check the deadline cuts short says nothing about what it checks: the error of the
// one before it is the one reported.
func TestPollReportsTheLastCheckBeforeTheDeadline(t *testing.T) {
	err := Poll(t.Context(), time.Millisecond, 50*time.Millisecond, func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
			return errors.New("route not accepted")
		}
	})
	if err == nil || !strings.Contains(err.Error(), "route not accepted") {
		t.Errorf("Poll = %v, want the last check's own error", err)
	}
}

func TestConditionForms(t *testing.T) {
	conds := []metav1.Condition{
		{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", Message: "fine"},
		{Type: "Programmed", Status: metav1.ConditionFalse, Reason: "Pending", Message: "waiting"},
	}
	for _, tt := range []struct{ got, want string }{
		{ConditionReason(conds, "Accepted"), "True/Accepted"},
		{ConditionReason(conds, "ResolvedRefs"), ""},
		{ConditionText(conds, "Programmed"), "False/Pending: waiting"},
		{ConditionText(conds, "ResolvedRefs"), "none"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
	if err := ConditionTrue(conds, "Accepted"); err != nil {
		t.Errorf("ConditionTrue(Accepted) = %v", err)
	}
	for _, condType := range []string{"Programmed", "ResolvedRefs"} {
		if err := ConditionTrue(conds, condType); err == nil {
			t.Errorf("ConditionTrue(%s) = nil", condType)
		}
	}
}

func TestMetricSum(t *testing.T) {
	text := `# HELP writes_total Writes.
# TYPE writes_total counter
writes_total{kind="Gateway",result="ok"} 2
writes_total{kind="HTTPRoute",result="ok"} 5
writes_total{kind="HTTPRoute",result="conflict"} 1
writes_total_other 100
`
	if got := MetricSum(text, "writes_total"); got != 8 {
		t.Errorf("sum of every series = %v, want 8", got)
	}
	if got := MetricSum(text, "writes_total", `kind="HTTPRoute"`, `result="ok"`); got != 5 {
		t.Errorf("sum of the HTTPRoute ok series = %v, want 5", got)
	}
}
