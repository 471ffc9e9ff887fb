package ops

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/transport/edge"
)

// edgeStub is an Edge whose Access guard lets in or refuses every
// caller, counting its calls; the other guards are not reached by the
// reload route.
type edgeStub struct {
	allow    bool
	accessed int
}

func (e *edgeStub) Management(*fasthttp.RequestCtx, []byte) bool { panic("not a reload guard") }
func (e *edgeStub) Access(ctx *fasthttp.RequestCtx, rid []byte) bool {
	e.accessed++
	if !e.allow {
		edge.WriteManagementError(ctx, rid, 403, "permission_error", "refused_by_stub", "refused")
	}
	return e.allow
}
func (e *edgeStub) Local(*fasthttp.RequestCtx, []byte) bool                          { panic("not a reload guard") }
func (e *edgeStub) Body(*fasthttp.RequestCtx, []byte) bool                           { return true }
func (e *edgeStub) JSON(*fasthttp.RequestCtx) bool                                   { return true }
func (e *edgeStub) Error(*fasthttp.RequestCtx, []byte, *apierror.Error)              { panic("not a reload answer") }
func (e *edgeStub) Stream(*fasthttp.RequestCtx, []byte, context.Context, StreamBody) {}

type reloaderStub struct {
	r     ReloadResult
	calls int
}

func (s *reloaderStub) ReloadConfig() ReloadResult { s.calls++; return s.r }

// TestReloadAnswers: each reload result has its status and error code,
// the reload runs only past the edge's guard, and a GET is refused
// before the guard is asked.
func TestReloadAnswers(t *testing.T) {
	post := func(a *API) (*fasthttp.RequestCtx, map[string]any) {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod(fasthttp.MethodPost)
		a.Reload(&ctx, []byte("rid-1"))
		var body map[string]any
		if err := json.Unmarshal(ctx.Response.Body(), &body); err != nil {
			t.Fatalf("body %q: %v", ctx.Response.Body(), err)
		}
		return &ctx, body
	}
	for _, tc := range []struct {
		result string
		status int
		code   string
	}{
		{ReloadOK, 200, ""},
		{ReloadInvalid, 422, "invalid_config"},
		{ReloadNeedsRestart, 409, "config_needs_restart"},
		{ReloadUnreadable, 503, "config_unreadable"},
	} {
		rl := &reloaderStub{r: ReloadResult{Applied: tc.result == ReloadOK, Result: tc.result, NeedsRestart: []string{}}}
		ctx, body := post(New(Ports{Edge: &edgeStub{allow: true}, Reloader: rl}))
		if ctx.Response.StatusCode() != tc.status || rl.calls != 1 || body["result"] != tc.result {
			t.Fatalf("%s: status %d, calls %d, body %v", tc.result, ctx.Response.StatusCode(), rl.calls, body)
		}
		e, _ := body["error"].(map[string]any)
		if tc.code == "" {
			if e != nil || body["requestId"] != nil {
				t.Fatalf("%s: an applied reload carries no error: %v", tc.result, body)
			}
			continue
		}
		if e["code"] != tc.code || body["requestId"] != "rid-1" {
			t.Fatalf("%s: error %v, requestId %v", tc.result, e, body["requestId"])
		}
	}

	edge, rl := &edgeStub{allow: false}, &reloaderStub{r: ReloadResult{Result: ReloadOK}}
	ctx, body := post(New(Ports{Edge: edge, Reloader: rl}))
	if ctx.Response.StatusCode() != 403 || rl.calls != 0 || edge.accessed != 1 {
		t.Fatalf("refused: status %d, reloads %d, guard calls %d, body %v", ctx.Response.StatusCode(), rl.calls, edge.accessed, body)
	}

	var get fasthttp.RequestCtx
	get.Request.Header.SetMethod(fasthttp.MethodGet)
	edge = &edgeStub{allow: true}
	New(Ports{Edge: edge, Reloader: rl}).Reload(&get, []byte("rid-2"))
	if get.Response.StatusCode() != 405 || string(get.Response.Header.Peek("Allow")) != "POST" || edge.accessed != 0 || rl.calls != 0 {
		t.Fatalf("GET: status %d, Allow %q, guard calls %d, reloads %d", get.Response.StatusCode(), get.Response.Header.Peek("Allow"), edge.accessed, rl.calls)
	}
}
