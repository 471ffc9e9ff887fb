package plan

import (
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/catalog/catalogtest"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/messages"
)

// fakeRequest is a request as the stage sees it through its port: a
// body, its scan, headers and a model; the rest is never reached by the
// functions under test.
type fakeRequest struct {
	ctx   fasthttp.RequestCtx
	body  []byte
	scan  jsonscan.Request
	model *catalog.Model
	known map[string]*catalog.Model
}

func newRequest(t *testing.T, body string, headers ...string) *fakeRequest {
	t.Helper()
	r := &fakeRequest{body: []byte(body)}
	if err := jsonscan.ScanRequest(r.body, &r.scan); err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.ctx.Request.Header.Set(headers[i], headers[i+1])
	}
	return r
}

func (r *fakeRequest) Ctx() *fasthttp.RequestCtx           { return &r.ctx }
func (r *fakeRequest) Model() *catalog.Model               { return r.model }
func (r *fakeRequest) Surface() catalog.Surface            { return catalog.Chat }
func (r *fakeRequest) Parsed() ([]byte, *jsonscan.Request) { return r.body, &r.scan }
func (r *fakeRequest) Counting() bool                      { return false }
func (r *fakeRequest) Deadline() time.Time                 { return time.Time{} }
func (r *fakeRequest) Cursor() uint64                      { return 0 }
func (r *fakeRequest) Resolve(name []byte) (*catalog.Model, *apierror.Error) {
	if m := r.known[string(name)]; m != nil {
		return m, nil
	}
	return nil, apierror.New(apierror.CodeModelNotFound, string(name))
}
func (r *fakeRequest) ModelRefused([]byte) *apierror.Error { return nil }
func (r *fakeRequest) Fits(*catalog.Target) bool           { return true }
func (r *fakeRequest) Metered() bool                       { return false }
func (r *fakeRequest) AttemptEnded(messages.FailureClass)  {}
func (r *fakeRequest) TryAdmit(*catalog.Target) bool       { return true }
func (r *fakeRequest) WaitAdmit(*catalog.Target) bool      { return true }
func (r *fakeRequest) NoteBusy(*catalog.Target)            {}
func (r *fakeRequest) DropAdmission()                      {}
func (r *fakeRequest) Canceller() Canceller                { return nil }
func (r *fakeRequest) Count(Event)                         {}

const turn3 = `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}`

// TestSessionKey: a conversation is known by its session header first,
// then prompt_cache_key, then metadata.user_id, then (from its third
// message on) its opening; a first turn without an id has none, and the
// same conversation gets the same key on every turn.
func TestSessionKey(t *testing.T) {
	byHeader := sessionKey(newRequest(t, turn3, "X-Claude-Code-Session-Id", "s1"))
	if byHeader == 0 || byHeader != sessionKey(newRequest(t, `{"model":"m"}`, "X-Claude-Code-Session-Id", "s1")) {
		t.Fatalf("a session header keys the conversation whatever the body: %d", byHeader)
	}
	if k := sessionKey(newRequest(t, turn3, "Thread-Id", "s1")); k == 0 || k == byHeader {
		t.Fatalf("each session header is its own namespace: %d", k)
	}
	cache := sessionKey(newRequest(t, `{"model":"m","prompt_cache_key":"k","metadata":{"user_id":"u"}}`))
	if cache == 0 || cache == sessionKey(newRequest(t, `{"model":"m","metadata":{"user_id":"u"}}`)) {
		t.Fatal("prompt_cache_key comes before metadata.user_id")
	}
	if sessionKey(newRequest(t, `{"model":"m","metadata":{"user_id":"u"}}`)) == 0 {
		t.Fatal("metadata.user_id keys the conversation")
	}
	if k := sessionKey(newRequest(t, `{"model":"m","messages":[{"role":"user","content":"a"}]}`)); k != 0 {
		t.Fatalf("a first turn without an id has no key, got %d", k)
	}
	opening := sessionKey(newRequest(t, turn3))
	next := `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"},{"role":"assistant","content":"d"},{"role":"user","content":"e"}]}`
	if opening == 0 || opening != sessionKey(newRequest(t, next)) {
		t.Fatal("a later turn of the same conversation keeps its key")
	}
}

// TestFallbacksRead: the body's fallback models resolve in order, the
// requested model and repeats are dropped, and a bad list is a 400 that
// names the field.
func TestFallbacksRead(t *testing.T) {
	cat := catalogtest.Build(t, `{
		"providers": {"p": {"base_url": "http://127.0.0.1:1/v1", "apis": ["chat"], "connections": {"k": {"api_key_env": "K"}}}},
		"models": {
			"m": {"targets": [{"connection": "p"}]},
			"a": {"targets": [{"connection": "p", "model": "up-a"}]},
			"b": {"targets": [{"connection": "p", "model": "up-b"}]}
		}
	}`)
	m, a, b := cat.Model([]byte("m")), cat.Model([]byte("a")), cat.Model([]byte("b"))
	known := map[string]*catalog.Model{"m": m, "a": a, "b": b}

	r := newRequest(t, `{"model":"m","models":["m","a","a","b"]}`)
	r.model, r.known = m, known
	var f Fallbacks
	if e := f.Read(r); e != nil {
		t.Fatalf("refused: %v", e.Message)
	}
	if !f.Present || f.Primary != m || len(f.Models) != 2 || f.Models[0] != a || f.Models[1] != b {
		t.Fatalf("fallbacks %+v", f)
	}

	for body, param := range map[string]string{
		`{"model":"m","fallbacks":[1]}`:       "fallbacks[0]",
		`{"model":"m","fallbacks":["a","x"]}`: "fallbacks[1]",
		`{"model":"m","models":"a"}`:          "models",
	} {
		r := newRequest(t, body)
		r.model, r.known = m, known
		var f Fallbacks
		e := f.Read(r)
		if e == nil || e.Status != 400 && e.Status != 404 || e.Param != param {
			t.Errorf("%s: want a refusal naming %s, got %+v", body, param, e)
		}
	}
}
