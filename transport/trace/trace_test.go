package trace

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/messages"
)

// fakeRequest is the port as a call would implement it; asked counts the
// reads, which tracing off must never make.
type fakeRequest struct {
	root    Root
	outcome Outcome
	asked   int
}

func (r *fakeRequest) TraceRoot() Root       { r.asked++; return r.root }
func (r *fakeRequest) TraceOutcome() Outcome { r.asked++; return r.outcome }

func target() *catalog.Target {
	return &catalog.Target{Name: "mock/a/m-up", UpstreamModel: "m-up", Conn: &catalog.Connection{Provider: &catalog.Provider{ID: "mock"}}}
}

// TestOffCostsNothing: without a tracer provider no step reads the
// request, opens a span or allocates.
func TestOffCostsNothing(t *testing.T) {
	var s Stage
	s.Init(nil)
	r := &fakeRequest{}
	tg := target()
	var st State
	allocs := testing.AllocsPerRun(100, func() {
		st.Start(&s, r)
		st.AdmissionWait(&s, tg, "interactive", time.Second)
		st.AttemptStart(&s, tg, catalog.Chat)
		st.AttemptOutcome(messages.OK, 200, time.Millisecond)
		st.AttemptEnd()
		st.End(r)
	})
	if allocs != 0 || r.asked != 0 || st != (State{}) {
		t.Fatalf("tracing off: %v allocations, the port read %d times, state %+v", allocs, r.asked, st)
	}
}

func attrsOf(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// TestSpans: the root span named for its configured model with the GenAI
// attributes, an admission wait and a failed attempt under it, and the
// outcome on the root when it ends; a model the gateway does not know
// names no span.
func TestSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	var s Stage
	s.Init(tp)
	tg := target()
	start := time.Now().Add(-time.Second)
	r := &fakeRequest{
		root: Root{Surface: catalog.Messages, Model: &catalog.Model{Name: "m"}, Asked: []byte("m\xff"), Stream: true,
			Route: []byte("/v1/messages"), RequestID: []byte("rid-1"), Start: start},
		outcome: Outcome{Status: 502, Fallbacks: 1, UsageSeen: true, Input: 3, Output: 4, Target: tg, Waited: 20 * time.Millisecond},
	}
	var st State
	st.Start(&s, r)
	st.AdmissionWait(&s, tg, "batch", 20*time.Millisecond)
	st.AttemptStart(&s, tg, catalog.Messages)
	st.AttemptOutcome(messages.FailureClass(1), 500, 7*time.Millisecond)
	st.AttemptEnd()
	st.End(r)
	if st != (State{}) || r.asked != 2 {
		t.Fatalf("after End: state %+v, port read %d times", st, r.asked)
	}
	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3", len(spans))
	}
	wait, att, root := spans[0], spans[1], spans[2]
	a := attrsOf(root)
	if root.Name() != "chat m" || !root.StartTime().Equal(start) || root.Parent().IsValid() ||
		a["gen_ai.operation.name"].AsString() != "chat" || a["gen_ai.request.model"].AsString() != "m?" ||
		!a["gen_ai.request.stream"].AsBool() || a["http.route"].AsString() != "/v1/messages" ||
		a["omniroute.request_id"].AsString() != "rid-1" || a["http.response.status_code"].AsInt64() != 502 ||
		a["omniroute.fallbacks"].AsInt64() != 1 || a["gen_ai.usage.input_tokens"].AsInt64() != 3 ||
		a["gen_ai.usage.output_tokens"].AsInt64() != 4 || a["gen_ai.provider.name"].AsString() != "mock" ||
		a["gen_ai.response.model"].AsString() != "m-up" || a["omniroute.target"].AsString() != "mock/a/m-up" ||
		a["omniroute.admission_wait_ms"].AsInt64() != 20 || root.Status().Code != codes.Error || root.Status().Description != "HTTP 502" {
		t.Fatalf("root span %q %v %v", root.Name(), a, root.Status())
	}
	for _, c := range []sdktrace.ReadOnlySpan{wait, att} {
		if c.Parent().SpanID() != root.SpanContext().SpanID() || c.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Fatalf("%q is not under the root span", c.Name())
		}
	}
	if w := attrsOf(wait); wait.Name() != "admission wait" || wait.EndTime().Sub(wait.StartTime()) != 20*time.Millisecond ||
		w["omniroute.target"].AsString() != "mock/a/m-up" || w["omniroute.priority"].AsString() != "batch" {
		t.Fatalf("admission wait span %q %v %v..%v", wait.Name(), w, wait.StartTime(), wait.EndTime())
	}
	class := messages.FailureClass(1)
	if x := attrsOf(att); att.Name() != "attempt mock/a/m-up" || x["gen_ai.operation.name"].AsString() != "chat" ||
		x["gen_ai.provider.name"].AsString() != "mock" || x["gen_ai.request.model"].AsString() != "m-up" ||
		x["omniroute.outcome"].AsString() != class.String() || x["omniroute.ttfb_ms"].AsInt64() != 7 ||
		x["http.response.status_code"].AsInt64() != 500 || att.Status().Code != codes.Error {
		t.Fatalf("attempt span %q %v %v", att.Name(), x, att.Status())
	}

	// A model the gateway does not know: the operation alone names the span.
	r.root.Model, r.root.Surface = nil, catalog.Embeddings
	r.outcome = Outcome{Status: 404}
	st.Start(&s, r)
	st.End(r)
	if spans = rec.Ended(); len(spans) != 4 || spans[3].Name() != "embeddings" || spans[3].Status().Code == codes.Error {
		t.Fatalf("unknown model's span: %q %v", spans[len(spans)-1].Name(), spans[len(spans)-1].Status())
	}
}
