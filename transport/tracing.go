package transport

import (
	"context"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/limits"
)

// Request traces (OpenTelemetry, GenAI semantic conventions): one root
// span per inference request, a child span for the time queued for
// admission and one per upstream attempt. Options.TracerProvider nil (no
// OTLP endpoint configured) leaves c.span nil, and every hook below
// returns at its first line: no allocation, no clock read.

// genAIOperation is gen_ai.operation.name for each inference surface.
func genAIOperation(s catalog.Surface) string {
	switch s {
	case catalog.Chat, catalog.Messages:
		return "chat"
	case catalog.Embeddings:
		return "embeddings"
	}
	return "generate_content"
}

// traceStart opens the request's root span once its model is resolved.
// The span's name holds only a configured model's name (the operation
// alone for a model the gateway does not know): span names are what
// tracing backends index and group by, and the caller's text would give
// them one name per made-up model. The attribute keeps what was asked
// for, bounded like the request log's.
func (c *call) traceStart() {
	tr := c.g.tracer
	if tr == nil {
		return
	}
	op := genAIOperation(c.surface)
	name, asked := op, c.scan.Model
	if c.model != nil {
		name = op + " " + c.model.Name
	}
	_, c.trace.span = tr.Start(context.Background(), name, trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(c.start),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", op),
			attribute.String("gen_ai.request.model", strings.ToValidUTF8(string(asked[:min(len(asked), limits.MaxLoggedModel)]), "?")),
			attribute.Bool("gen_ai.request.stream", c.scan.Stream),
			attribute.String("http.route", string(c.ctx.Path())),
			attribute.String("omniroute.request_id", string(c.rid)),
		))
}

// traceEnd closes the root span with the answer's status and usage.
func (c *call) traceEnd() {
	if c.trace.span == nil {
		return
	}
	status := c.ctx.Response.StatusCode()
	attrs := []attribute.KeyValue{attribute.Int("http.response.status_code", status), attribute.Int("omniroute.fallbacks", c.att.Fallbacks)}
	if u := &c.plan.Usage; u.Seen {
		attrs = append(attrs, attribute.Int64("gen_ai.usage.input_tokens", u.Input),
			attribute.Int64("gen_ai.usage.output_tokens", u.Output))
	}
	if c.att.Target != nil {
		attrs = append(attrs, attribute.String("gen_ai.provider.name", c.att.Target.Conn.Provider.ID),
			attribute.String("gen_ai.response.model", c.att.Target.UpstreamModel), attribute.String("omniroute.target", c.att.Target.Name))
	}
	if c.lane.Waited > 0 {
		attrs = append(attrs, attribute.Int64("omniroute.admission_wait_ms", c.lane.Waited.Milliseconds()))
	}
	c.trace.span.SetAttributes(attrs...)
	if status >= 500 || c.stream.Cut() {
		c.trace.span.SetStatus(codes.Error, "HTTP "+strconv.Itoa(status))
	}
	c.trace.span.End()
	c.trace.span = nil
}

// traceAdmissionWait records a finished admission wait as a child span.
func (c *call) traceAdmissionWait(t *catalog.Target, waited time.Duration) {
	if c.trace.span == nil || waited <= 0 {
		return
	}
	now := time.Now()
	_, sp := c.g.tracer.Start(trace.ContextWithSpan(context.Background(), c.trace.span), "admission wait", trace.WithTimestamp(now.Add(-waited)),
		trace.WithAttributes(attribute.String("omniroute.target", t.Name), attribute.String("omniroute.priority", c.lane.Class.String())))
	sp.End(trace.WithTimestamp(now))
}

// traceAttemptStart opens the span of one upstream attempt; its outcome is
// set by traceAttemptOutcome (report) and it ends with the attempt.
func (c *call) traceAttemptStart(t *catalog.Target) {
	if c.trace.span == nil {
		return
	}
	_, c.trace.attemptSpan = c.g.tracer.Start(trace.ContextWithSpan(context.Background(), c.trace.span), "attempt "+t.Name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("gen_ai.operation.name", genAIOperation(c.surface)),
			attribute.String("gen_ai.provider.name", t.Conn.Provider.ID), attribute.String("gen_ai.request.model", t.UpstreamModel),
			attribute.String("omniroute.target", t.Name)))
}

func (c *call) traceAttemptOutcome(class messages.FailureClass, status int, ttfb time.Duration) {
	if c.trace.attemptSpan == nil {
		return
	}
	c.trace.attemptSpan.SetAttributes(attribute.String("omniroute.outcome", class.String()), attribute.Int64("omniroute.ttfb_ms", ttfb.Milliseconds()))
	if status != 0 {
		c.trace.attemptSpan.SetAttributes(attribute.Int("http.response.status_code", status))
	}
	if class != messages.OK {
		c.trace.attemptSpan.SetStatus(codes.Error, class.String())
	}
}

func (c *call) traceAttemptEnd() {
	if c.trace.attemptSpan == nil {
		return
	}
	c.trace.attemptSpan.End()
	c.trace.attemptSpan = nil
}

// traceState is the request's spans: the root span and the current
// attempt's; both nil unless a tracer provider is configured.
type traceState struct {
	span, attemptSpan trace.Span
}
