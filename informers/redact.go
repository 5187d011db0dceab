package informers

import (
	"context"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// bodyLogVerbosity is where client-go starts to log request and response bodies.
const bodyLogVerbosity = 8

// withoutBodyLogging returns ctx with a logger that drops everything at
// bodyLogVerbosity and above. client-go logs through the request context's logger, so
// requests made with it never log a body: a Secret's body holds its private key.
func withoutBodyLogging(ctx context.Context) context.Context {
	sink := klog.FromContext(ctx).GetSink()
	// The wrapper adds a frame between the caller and the sink.
	if d, ok := sink.(logr.CallDepthLogSink); ok {
		sink = d.WithCallDepth(1)
	}
	return klog.NewContext(ctx, logr.New(cappedSink{sink: sink}))
}

var _ logr.CallDepthLogSink = cappedSink{}

// cappedSink forwards to sink only below bodyLogVerbosity.
type cappedSink struct {
	sink logr.LogSink
}

func (c cappedSink) allowed(level int) bool { return level < bodyLogVerbosity }

// Init does nothing: the wrapped sink was initialized by its own logger and is shared,
// so initializing it again would race with its users.
func (c cappedSink) Init(logr.RuntimeInfo) {}

func (c cappedSink) Enabled(level int) bool { return c.allowed(level) && c.sink.Enabled(level) }

func (c cappedSink) Info(level int, msg string, keysAndValues ...any) {
	if c.allowed(level) {
		c.sink.Info(level, msg, keysAndValues...)
	}
}

func (c cappedSink) Error(err error, msg string, keysAndValues ...any) {
	c.sink.Error(err, msg, keysAndValues...)
}

func (c cappedSink) WithValues(keysAndValues ...any) logr.LogSink {
	return cappedSink{sink: c.sink.WithValues(keysAndValues...)}
}

func (c cappedSink) WithName(name string) logr.LogSink {
	return cappedSink{sink: c.sink.WithName(name)}
}

// WithCallDepth keeps file:line right when the wrapped sink supports it.
func (c cappedSink) WithCallDepth(depth int) logr.LogSink {
	if d, ok := c.sink.(logr.CallDepthLogSink); ok {
		return cappedSink{sink: d.WithCallDepth(depth)}
	}
	return c
}
