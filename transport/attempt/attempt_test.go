package attempt

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/modelinfo"
	"github.com/omniroute/gateway/internal/sse"
	"github.com/omniroute/gateway/messages"
	"github.com/omniroute/gateway/transport/upstream"
)

// TestCopyResponseHeadersKeepsOnlyTheCallers: hop-by-hop, framing,
// cookie and identity headers never reach the caller, whatever their
// case; everything else (a provider's rate-limit headers) does.
func TestCopyResponseHeadersKeepsOnlyTheCallers(t *testing.T) {
	var src, dst fasthttp.ResponseHeader
	src.DisableNormalizing()
	for _, k := range []string{"Date", "SERVER", "trailer", "Connection", "Keep-Alive", "Set-Cookie", "X-Request-Id",
		"Content-Length", "Transfer-Encoding", "Proxy-Authenticate", "proxy-connection"} {
		src.Set(k, "v")
	}
	src.Set("X-Ratelimit-Remaining-Requests", "9")
	src.Set("Anthropic-Ratelimit-Tokens-Limit", "1000")
	src.Set("Proxy", "short") // "proxy-" is a prefix only
	CopyResponseHeaders(&dst, &src)
	got := map[string]string{}
	for k, v := range dst.All() {
		got[http.CanonicalHeaderKey(string(k))] = string(v)
	}
	want := map[string]string{"X-Ratelimit-Remaining-Requests": "9", "Anthropic-Ratelimit-Tokens-Limit": "1000", "Proxy": "short"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q (copied: %v)", k, got[k], v, got)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok && k != "Content-Type" {
			t.Errorf("%s reached the caller", k)
		}
	}
}

// TestClassifyNamesTheFailure: each transport error has its class,
// wrapped or not; anything else is a connection failure.
func TestClassifyNamesTheFailure(t *testing.T) {
	for _, c := range []struct {
		err  error
		want messages.FailureClass
	}{
		{upstream.ErrCanceled, messages.Canceled},
		{upstream.ErrTimeout, messages.Timeout},
		{fmt.Errorf("reading: %w", upstream.ErrTimeout), messages.Timeout},
		{upstream.ErrTooLarge, messages.Protocol},
		{sse.ErrEventTooLarge, messages.Protocol},
		{errors.New("connection refused"), messages.Connect},
	} {
		if got := Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestReadStrictAcceptsOnlyBooleans: true/1 and false/0 set strict mode,
// an absent header leaves it to the model, anything else is refused.
func TestReadStrictAcceptsOnlyBooleans(t *testing.T) {
	var st State
	for v, want := range map[string]uint8{"": strictUnset, "true": strictOn, "1": strictOn, "false": strictOff, "0": strictOff} {
		if e := st.ReadStrict([]byte(v)); e != nil || st.fit.strict != want {
			t.Errorf("ReadStrict(%q) = %v, strict %d; want nil, %d", v, e, st.fit.strict, want)
		}
	}
	if e := st.ReadStrict([]byte("yes")); e == nil || e.Status != 400 {
		t.Errorf("ReadStrict(yes) = %v, want a 400", e)
	}
}

// TestFitsWindowAndTools: a prompt above a known window, or tools offered
// to a model without them, does not fit; an unknown window always does.
func TestFitsWindowAndTools(t *testing.T) {
	small := &modelinfo.Info{ContextWindow: 100, Tools: false}
	if Fits(small, 101, 0) || !Fits(small, 100, 0) || Fits(small, 10, 1) {
		t.Error("a 100-token window without tools: wrong fit")
	}
	open := &modelinfo.Info{Tools: true}
	if !Fits(open, 1<<40, 3) {
		t.Error("an unknown window with tools must fit")
	}
}

// TestStartRequestAsksForTheRightAnswer: POST to base+path, JSON, events
// for a stream, no compression.
func TestStartRequestAsksForTheRightAnswer(t *testing.T) {
	for _, stream := range []bool{false, true} {
		var h fasthttp.RequestHeader
		StartRequest(&h, "/base", "/v1/chat/completions", "up.example:8080", stream)
		accept := "application/json"
		if stream {
			accept = "text/event-stream"
		}
		if string(h.Method()) != "POST" || string(h.RequestURI()) != "/base/v1/chat/completions" || string(h.Host()) != "up.example:8080" ||
			string(h.ContentType()) != "application/json" || string(h.Peek("Accept")) != accept || string(h.Peek("Accept-Encoding")) != "identity" {
			t.Errorf("stream=%v: %s", stream, h.Header())
		}
	}
}
