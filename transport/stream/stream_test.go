package stream

import (
	"bufio"
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/catalog"
	dia "github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/ledger"
	"github.com/omniroute/gateway/internal/modelinfo"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/attempt"
	"github.com/omniroute/gateway/transport/upstream"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// fakeCall is the stage's port on a chat request that meters nothing
// and renames nothing: what the stage asked of it is recorded.
type fakeCall struct {
	relayed   int
	cuts      int
	reported  []messages.FailureClass
	cancelled bool
}

func (f *fakeCall) AttemptBody() ([]byte, *jsonscan.Request)   { return nil, nil }
func (f *fakeCall) AttemptModel() *catalog.Model               { return nil }
func (f *fakeCall) AttemptFallbacks() (*catalog.Model, bool)   { return nil, false }
func (f *fakeCall) Counting() bool                             { return false }
func (f *fakeCall) TargetInfo(*catalog.Target) *modelinfo.Info { return attempt.UnknownInfo() }
func (f *fakeCall) Metering() (bool, *ledger.Usage, *bool)     { return false, nil, nil }
func (f *fakeCall) RequestID() []byte                          { return []byte("rid-1") }
func (f *fakeCall) CallerDialect() *dia.Dialect                { return dia.Of(dia.Chat) }
func (f *fakeCall) Redact(b []byte) []byte                     { return b }
func (f *fakeCall) CancelUpstream()                            { f.cancelled = true }
func (f *fakeCall) Relayed(n int)                              { f.relayed += n }
func (f *fakeCall) CountCut()                                  { f.cuts++ }
func (f *fakeCall) ReportMidStream(class messages.FailureClass) {
	f.reported = append(f.reported, class)
}

// open serves body as a chat event stream on loopback and returns the
// exchange reading it, its headers read.
func open(t *testing.T, body string) *upstream.Exchange {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("text/event-stream")
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			for _, ev := range strings.SplitAfter(body, "\n\n") {
				w.WriteString(ev)
				w.Flush()
			}
		})
	}, CloseOnShutdown: true}
	done := make(chan struct{})
	go func() { _ = s.Serve(ln); close(done) }()
	t.Cleanup(func() { _ = s.Shutdown(); <-done })
	c := upstream.New(upstream.Options{Addr: ln.Addr().String(), MaxConns: 1, ConnectTimeout: time.Second,
		TTFBTimeout: 5 * time.Second, TotalTimeout: 10 * time.Second, MaxResponseBytes: 1 << 20})
	t.Cleanup(c.Close)
	x := upstream.AcquireExchange()
	x.Req.Header.SetMethod("POST")
	x.Req.SetRequestURI("/v1/chat/completions")
	x.Req.Header.SetHost(c.Addr())
	x.Req.SetBodyString(`{"model":"m","stream":true}`)
	if err := c.Do(x, nil, true); err != nil {
		t.Fatal(err)
	}
	return x
}

const (
	roleOnly = "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n"
	content  = "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n"
	finished = "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
	done     = "data: [DONE]\n\n"
)

// relay holds x's start-up, commits and relays it as the pipeline does,
// returning what the caller was sent.
func relay(t *testing.T, s *State, f *fakeCall, x *upstream.Exchange) string {
	t.Helper()
	var att attempt.State
	att.Begin(catalog.Chat)
	if ev, err := s.HoldStartup(f, &att, x, time.Second, true); ev != nil || err != nil {
		t.Fatalf("HoldStartup: event %v, error %v; want both nil", ev, err)
	}
	var ctx fasthttp.RequestCtx
	s.Commit(&ctx, x, time.Second, nil)
	var out bytes.Buffer
	n, err := s.Relay(f, &att, &out)
	if err != nil || n != int64(out.Len()) {
		t.Fatalf("Relay: %d bytes, error %v; wrote %d", n, err, out.Len())
	}
	if ct := string(ctx.Response.Header.ContentType()); ct != "text/event-stream" {
		t.Errorf("Commit set Content-Type %q", ct)
	}
	return out.String()
}

// A chat stream's role-only opening is held back with the first content
// event, then the rest relayed one event per write, each counted once.
func TestHoldThenRelay(t *testing.T) {
	body := roleOnly + content + content + finished + done
	var s State
	f := &fakeCall{}
	x := open(t, body)
	if got := relay(t, &s, f, x); got != body {
		t.Fatalf("relayed %q, want %q", got, body)
	}
	if f.relayed != 5 || !s.Terminal() || s.Cut() || f.cuts != 0 || f.cancelled {
		t.Fatalf("relayed %d events, terminal %v, cut %v (%d), cancelled %v; want 5, true, false, false",
			f.relayed, s.Terminal(), s.Cut(), f.cuts, f.cancelled)
	}
	s.Recycle() // gives the exchange back
}

// A stream that ends after its finish reason but without the done marker
// gets the marker it forgot; one that breaks before it gets the
// surface's interrupt frame, the failure reported against the target.
func TestEndWithoutDone(t *testing.T) {
	var s State
	f := &fakeCall{}
	x := open(t, roleOnly+content+finished)
	if got := relay(t, &s, f, x); got != roleOnly+content+finished+string(dia.DoneFrame) {
		t.Fatalf("relayed %q: want the done marker supplied", got)
	}
	if s.Cut() || f.cuts != 0 {
		t.Fatal("a stream ended after its finish reason counted as cut")
	}
	s.Recycle()

	s, f = State{}, &fakeCall{}
	x = open(t, roleOnly+content)
	got := relay(t, &s, f, x)
	if !strings.HasPrefix(got, roleOnly+content+"data: {\"error\":") || !strings.Contains(got, "stream_interrupted") {
		t.Fatalf("relayed %q: want the chat interrupt frame after the events", got)
	}
	if !s.Cut() || f.cuts != 1 || len(f.reported) != 1 || f.reported[0] == messages.OK {
		t.Fatalf("cut %v, counted %d, reported %v: want the break counted and reported once", s.Cut(), f.cuts, f.reported)
	}
	s.Recycle()
}

// An error event right after the start-up fails over: HoldStartup
// returns it instead of holding it, and nothing is written.
func TestErrorEventFailsOver(t *testing.T) {
	var s State
	f := &fakeCall{}
	x := open(t, roleOnly+"data: {\"error\":{\"message\":\"overloaded\"}}\n\n")
	defer x.Release()
	var att attempt.State
	att.Begin(catalog.Chat)
	ev, err := s.HoldStartup(f, &att, x, time.Second, true)
	if err != nil || ev == nil || !bytes.Contains(ev.Data, []byte("overloaded")) {
		t.Fatalf("HoldStartup: event %v, error %v; want the error event", ev, err)
	}
}

func TestJSONStringField(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"type":"response.created","response":{"id":"resp_1","x":1}}`, "resp_1"},
		{`{"response":{}}`, ""},
		{`{"id":"unterminated`, ""},
	} {
		if got := string(jsonStringField([]byte(c.in), `"id":"`)); got != c.want {
			t.Errorf("jsonStringField(%s) = %q, want %q", c.in, got, c.want)
		}
	}
}
