// Package trace is the request pipeline's OpenTelemetry spans (GenAI
// semantic conventions): one root span per inference request, a child
// span for the time queued for admission and one per upstream attempt.
//
// Stage is the process-wide part (the tracer, nil when no tracer provider
// is configured: Options.TracerProvider, which cmd/omniroute sets when an
// OTLP endpoint is configured, internal/tracing); State is one request's
// (the pipeline call's trace field, zeroed with it). With tracing off the
// root span is never opened, and every method returns at its first line:
// no allocation, no clock read. What the root span reads of the request
// comes through the port the call implements (Request), asked only when
// a span opens or closes; the attempts' steps pass plain values. It
// imports no other stage, and its spans never touch an actor.
package trace

import (
	"context"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/messages"
)

// Scope is the instrumentation scope of the gateway's spans. It is
// package transport's path, where the spans were made before they had a
// package of their own: kept, so that what tracing backends filter or
// group by scope goes on finding them.
const Scope = "github.com/omniroute/gateway/transport"

// Stage is the process-wide part: the tracer, nil while tracing is off.
type Stage struct {
	tracer oteltrace.Tracer
}

// Init takes the tracer of tp; a nil tp leaves tracing off at no cost on
// the request path.
func (s *Stage) Init(tp oteltrace.TracerProvider) {
	if tp != nil {
		s.tracer = tp.Tracer(Scope)
	}
}

// Request is the stage's port on the request it traces (the pipeline's
// call implements it): what the root span opens and closes with, read
// only when tracing is on.
type Request interface {
	// TraceRoot is what the root span opens with.
	TraceRoot() Root
	// TraceOutcome is what the root span closes with.
	TraceOutcome() Outcome
}

// Root is what a request's root span opens with.
type Root struct {
	Surface catalog.Surface
	// Model is the configured model the request names; nil for a model
	// the gateway does not know.
	Model *catalog.Model
	// Asked is the model as the caller named it, already bounded like
	// the request log's (limits.MaxLoggedModel); it may alias the body.
	Asked     []byte
	Stream    bool
	Route     []byte // the request's path (http.route)
	RequestID []byte
	Start     time.Time // when the request arrived: the span's start
}

// Outcome is what a request's root span closes with.
type Outcome struct {
	Status    int // the answer's HTTP status
	Fallbacks int // how many fallbacks were tried
	// UsageSeen reports a usage report from the provider: Input and
	// Output are its tokens.
	UsageSeen     bool
	Input, Output int64
	Target        *catalog.Target // the serving target; nil if none answered
	Waited        time.Duration   // queued for admission, over all attempts
	Cut           bool            // a committed stream ended early: an error
}

// State is one request's spans: the root span and the current attempt's;
// both nil unless tracing is on.
type State struct {
	span, attemptSpan oteltrace.Span
}

// Operation is gen_ai.operation.name for each inference surface.
func Operation(s catalog.Surface) string {
	switch s {
	case catalog.Chat, catalog.Messages:
		return "chat"
	case catalog.Embeddings:
		return "embeddings"
	}
	return "generate_content"
}

// Start opens the request's root span once its model is resolved. The
// span's name holds only a configured model's name (the operation alone
// for a model the gateway does not know): span names are what tracing
// backends index and group by, and the caller's text would give them one
// name per made-up model. The attribute keeps what was asked for,
// bounded like the request log's.
func (st *State) Start(s *Stage, r Request) {
	tr := s.tracer
	if tr == nil {
		return
	}
	ro := r.TraceRoot()
	op := Operation(ro.Surface)
	name := op
	if ro.Model != nil {
		name = op + " " + ro.Model.Name
	}
	_, st.span = tr.Start(context.Background(), name, oteltrace.WithSpanKind(oteltrace.SpanKindServer), oteltrace.WithTimestamp(ro.Start),
		oteltrace.WithAttributes(
			attribute.String("gen_ai.operation.name", op),
			attribute.String("gen_ai.request.model", strings.ToValidUTF8(string(ro.Asked), "?")),
			attribute.Bool("gen_ai.request.stream", ro.Stream),
			attribute.String("http.route", string(ro.Route)),
			attribute.String("omniroute.request_id", string(ro.RequestID)),
		))
}

// End closes the root span with the answer's status and usage.
func (st *State) End(r Request) {
	if st.span == nil {
		return
	}
	o := r.TraceOutcome()
	attrs := []attribute.KeyValue{attribute.Int("http.response.status_code", o.Status), attribute.Int("omniroute.fallbacks", o.Fallbacks)}
	if o.UsageSeen {
		attrs = append(attrs, attribute.Int64("gen_ai.usage.input_tokens", o.Input),
			attribute.Int64("gen_ai.usage.output_tokens", o.Output))
	}
	if t := o.Target; t != nil {
		attrs = append(attrs, attribute.String("gen_ai.provider.name", t.Conn.Provider.ID),
			attribute.String("gen_ai.response.model", t.UpstreamModel), attribute.String("omniroute.target", t.Name))
	}
	if o.Waited > 0 {
		attrs = append(attrs, attribute.Int64("omniroute.admission_wait_ms", o.Waited.Milliseconds()))
	}
	st.span.SetAttributes(attrs...)
	if o.Status >= 500 || o.Cut {
		st.span.SetStatus(codes.Error, "HTTP "+strconv.Itoa(o.Status))
	}
	st.span.End()
	st.span = nil
}

// AdmissionWait records a finished admission wait on t's upstream, in
// the priority class named class, as a child span.
func (st *State) AdmissionWait(s *Stage, t *catalog.Target, class string, waited time.Duration) {
	if st.span == nil || waited <= 0 {
		return
	}
	now := time.Now()
	_, sp := s.tracer.Start(oteltrace.ContextWithSpan(context.Background(), st.span), "admission wait", oteltrace.WithTimestamp(now.Add(-waited)),
		oteltrace.WithAttributes(attribute.String("omniroute.target", t.Name), attribute.String("omniroute.priority", class)))
	sp.End(oteltrace.WithTimestamp(now))
}

// AttemptStart opens the span of one upstream attempt on t, for a
// request on surface; its outcome is set by AttemptOutcome and it ends
// with the attempt (AttemptEnd).
func (st *State) AttemptStart(s *Stage, t *catalog.Target, surface catalog.Surface) {
	if st.span == nil {
		return
	}
	_, st.attemptSpan = s.tracer.Start(oteltrace.ContextWithSpan(context.Background(), st.span), "attempt "+t.Name, oteltrace.WithSpanKind(oteltrace.SpanKindClient),
		oteltrace.WithAttributes(attribute.String("gen_ai.operation.name", Operation(surface)),
			attribute.String("gen_ai.provider.name", t.Conn.Provider.ID), attribute.String("gen_ai.request.model", t.UpstreamModel),
			attribute.String("omniroute.target", t.Name)))
}

// AttemptOutcome sets the attempt's outcome: its failure class, the
// upstream's status (0: none) and the time to its first byte.
func (st *State) AttemptOutcome(class messages.FailureClass, status int, ttfb time.Duration) {
	if st.attemptSpan == nil {
		return
	}
	st.attemptSpan.SetAttributes(attribute.String("omniroute.outcome", class.String()), attribute.Int64("omniroute.ttfb_ms", ttfb.Milliseconds()))
	if status != 0 {
		st.attemptSpan.SetAttributes(attribute.Int("http.response.status_code", status))
	}
	if class != messages.OK {
		st.attemptSpan.SetStatus(codes.Error, class.String())
	}
}

// AttemptEnd ends the current attempt's span.
func (st *State) AttemptEnd() {
	if st.attemptSpan == nil {
		return
	}
	st.attemptSpan.End()
	st.attemptSpan = nil
}
