package informers

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"
)

func TestWithoutBodyLoggingDropsBodyVerbosity(t *testing.T) {
	var lines []string
	sink := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: 10})
	ctx := withoutBodyLogging(klog.NewContext(context.Background(), sink))
	logger := klog.FromContext(ctx).WithName("secrets").WithValues("k", "v")

	logger.V(7).Info("url and headers")
	logger.V(8).Info("Response Body", "body", "tls.key: SECRET")
	logger.V(10).Info("curl", "body", "tls.key: SECRET")
	logger.Error(nil, "failed")
	if logger.V(8).Enabled() {
		t.Error("V(8) is enabled: client-go would log bodies")
	}
	got := strings.Join(lines, "\n")
	if strings.Contains(got, "SECRET") {
		t.Errorf("a body reached the log:\n%s", got)
	}
	for _, want := range []string{"url and headers", "failed"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q missing from the log:\n%s", want, got)
		}
	}
}
