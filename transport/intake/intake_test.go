package intake

import (
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
)

// TestStructureWithoutActor: the structural stage refuses a conversation
// over the message limit (413, its reason named) and passes a light body
// without touching the ingest actor. The stage runs here without the
// pipeline or the actors.
func TestStructureWithoutActor(t *testing.T) {
	var s Stage
	s.Attach(nil, nil, Config{HardMaxMessages: 3, HeavyMessages: 100, HeavyTools: 10, HeavyTokens: 32000}, nil)
	var st State
	e := st.Structure(&s, nil, 4, 0, []byte(`{"messages":[]}`))
	if e == nil || e.Status != 413 || e.Reason == "" {
		t.Fatalf("4 messages over a limit of 3: %v, want a 413 with its reason", e)
	}
	if e := st.Structure(&s, nil, 3, 1, []byte(`{"messages":[{"role":"user","content":"hi"}]}`)); e != nil || st.lease != nil {
		t.Fatalf("a light body: %v, lease %v", e, st.lease)
	}
}

// TestRefuseClosesOnlyAnUnreadBody: a refusal keeps the connection when
// the whole body came with the headers and nobody started reading it;
// a larger or chunked body, or one being read, closes it instead of
// draining. The reason is named either way.
func TestRefuseClosesOnlyAnUnreadBody(t *testing.T) {
	var s Stage
	e := apierror.New(apierror.CodeResourcePressure).WithReason("resource_pressure")
	for _, tc := range []struct {
		length  int
		reading bool
		close   bool
	}{{100, false, false}, {100, true, true}, {-1, false, true}, {prefetchedBody + 1, false, true}} {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetContentLength(tc.length)
		if got := s.Refuse(&ctx, e, tc.reading); got != e {
			t.Fatalf("Refuse returned %v, want its error", got)
		}
		if ctx.Response.ConnectionClose() != tc.close || string(ctx.Response.Header.Peek(reasonHeader)) != "resource_pressure" {
			t.Errorf("length %d reading %v: close %v reason %q, want close %v", tc.length, tc.reading,
				ctx.Response.ConnectionClose(), ctx.Response.Header.Peek(reasonHeader), tc.close)
		}
	}
}
