package transport_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/internal/tracing"
	"github.com/omniroute/gateway/transport/gateway"
)

// otlpReceiver is an in-process OTLP/HTTP trace receiver: it decodes the
// protobuf export requests the real exporter sends and keeps the spans.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	srv   *http.Server
	url   string
	done  chan struct{}
}

func startReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{url: "http://" + ln.Addr().String() + "/v1/traces", done: make(chan struct{})}
	r.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		var ex coltrace.ExportTraceServiceRequest
		if req.URL.Path != "/v1/traces" || proto.Unmarshal(b, &ex) != nil {
			http.Error(w, "bad export", 400)
			return
		}
		r.mu.Lock()
		for _, rs := range ex.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	})}
	go func() { defer close(r.done); r.srv.Serve(ln) }()
	t.Cleanup(func() { r.srv.Close(); <-r.done })
	return r
}

func attrs(s *tracepb.Span) map[string]any {
	m := map[string]any{}
	for _, kv := range s.Attributes {
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = v.IntValue
		case *commonpb.AnyValue_BoolValue:
			m[kv.Key] = v.BoolValue
		}
	}
	return m
}

// collect flushes tp until the receiver holds at least n spans (or 10 s
// passed) and returns them.
func (r *otlpReceiver) collect(tp interface{ ForceFlush(context.Context) error }, n int) []*tracepb.Span {
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = tp.ForceFlush(ctx)
		cancel()
		r.mu.Lock()
		spans := append([]*tracepb.Span(nil), r.spans...)
		r.mu.Unlock()
		if len(spans) >= n || time.Now().After(deadline) {
			return spans
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTracesOverOTLP: one request that fails over gives one root span with
// the GenAI attributes and one child span per upstream attempt, exported
// over OTLP/HTTP by the real exporter to an in-process receiver.
func TestTracesOverOTLP(t *testing.T) {
	rcv := startReceiver(t)
	tp, err := tracing.New(context.Background(), "test", otlptracehttp.WithEndpointURL(rcv.url))
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Shutdown(context.Background())
	resetMock(t)
	setBehavior(t, map[string]mockprovider.Behavior{"m-first": {Fail: mockprovider.FailSpec{Mode: "status", Status: 500, Times: 1}}})
	g := startGatewayWith(t, testFile(t, ""), nil, gateway.Options{TracerProvider: tp})
	r := g.post("/v1/chat/completions", `{"model":"failover","messages":[{"role":"user","content":"hi"}]}`, "X-Request-Id", "trace-me")
	if r.status != 200 || r.header.Get("X-OmniRoute-Fallbacks") != "1" {
		t.Fatalf("failover: %d %v %s", r.status, r.header, r.body)
	}
	spans := rcv.collect(tp, 3)
	var roots, children []*tracepb.Span
	for _, s := range spans {
		if len(s.ParentSpanId) == 0 {
			roots = append(roots, s)
		} else {
			children = append(children, s)
		}
	}
	if len(roots) != 1 {
		t.Fatalf("%d root spans, want 1: %v", len(roots), spans)
	}
	root := roots[0]
	a := attrs(root)
	if root.Name != "chat failover" || a["gen_ai.operation.name"] != "chat" || a["gen_ai.request.model"] != "failover" ||
		a["gen_ai.provider.name"] != "mock" || a["gen_ai.response.model"] != "m-second" || a["omniroute.request_id"] != "trace-me" {
		t.Fatalf("root span %s %v", root.Name, a)
	}
	if in, out := a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]; in == nil || out == nil || out.(int64) <= 0 {
		t.Fatalf("usage attributes %v %v", in, out)
	}
	if len(children) != 2 {
		t.Fatalf("%d child spans, want one per attempt (2): %v", len(children), children)
	}
	want := []string{"attempt mock/a/m-first", "attempt mock/b/m-second"}
	for i, c := range children {
		if string(c.ParentSpanId) != string(root.SpanId) || string(c.TraceId) != string(root.TraceId) {
			t.Fatalf("child %s is not under the root span", c.Name)
		}
		if c.Name != want[0] && c.Name != want[1] {
			t.Fatalf("child %d %q", i, c.Name)
		}
		if c.StartTimeUnixNano < root.StartTimeUnixNano || c.EndTimeUnixNano > root.EndTimeUnixNano {
			t.Fatalf("child %s outside its root's time", c.Name)
		}
	}
	first, second := children[0], children[1]
	if first.Name != want[0] {
		first, second = second, first
	}
	if first.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || second.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR ||
		first.EndTimeUnixNano > second.StartTimeUnixNano {
		t.Fatalf("attempts: first %v %d..%d, second %v %d..%d", first.Status, first.StartTimeUnixNano, first.EndTimeUnixNano,
			second.Status, second.StartTimeUnixNano, second.EndTimeUnixNano)
	}

	// Made-up model names do not name spans (one span name each would be
	// unbounded cardinality in the tracing backend).
	rcv.mu.Lock()
	rcv.spans = nil
	rcv.mu.Unlock()
	for i := 0; i < 3; i++ {
		if r := g.post("/v1/chat/completions", fmt.Sprintf(`{"model":"made-up-%d","messages":[]}`, i)); r.status != 404 {
			t.Fatalf("unknown model: %d %s", r.status, r.body)
		}
	}
	if spans = rcv.collect(tp, 3); len(spans) != 3 {
		t.Fatalf("%d spans for three unknown models", len(spans))
	}
	for _, sp := range spans {
		if sp.Name != "chat" || !strings.HasPrefix(fmt.Sprint(attrs(sp)["gen_ai.request.model"]), "made-up-") {
			t.Fatalf("span of an unknown model: %q %v", sp.Name, attrs(sp))
		}
	}
}
