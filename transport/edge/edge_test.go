package edge

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// stubPipeline records what the edge reports to the gateway behind it.
type stubPipeline struct {
	mu       sync.Mutex
	finished []finishedCall
	panicked []string // route/where
	expect   func(ctx *fasthttp.RequestCtx) (int, bool)
}

type finishedCall struct {
	route  Route
	status int
}

func (s *stubPipeline) Finished(r Route, status int, _ time.Duration) {
	s.mu.Lock()
	s.finished = append(s.finished, finishedCall{r, status})
	s.mu.Unlock()
}

func (s *stubPipeline) Panicked(r Route, _ string, where string, _ any) {
	s.mu.Lock()
	s.panicked = append(s.panicked, r.String()+"/"+where)
	s.mu.Unlock()
}

func (s *stubPipeline) ExpectBody(ctx *fasthttp.RequestCtx) (int, bool) {
	if s.expect != nil {
		return s.expect(ctx)
	}
	return 0, false
}

// testEdge is an edge whose every handler answers 200 with its handler
// id and route label in the body ("h3 models"), so a test sees where a
// request was dispatched; hook, when set, runs first.
type testEdge struct {
	*Edge
	pipe *stubPipeline
	hook func(h Handler, ctx *fasthttp.RequestCtx)
}

func newTestEdge(t testing.TB, vars ...string) *testEdge {
	t.Helper()
	m := map[string]string{"OMNIROUTE_DATA_DIR": t.TempDir()}
	for i := 0; i+1 < len(vars); i += 2 {
		m[vars[i]] = vars[i+1]
	}
	env, err := config.LoadEnv(m)
	if err != nil {
		t.Fatal(err)
	}
	te := &testEdge{pipe: &stubPipeline{}}
	var hs [NumHandlers]HandlerFunc
	for h := Handler(0); h < NumHandlers; h++ {
		h := h
		hs[h] = func(ctx *fasthttp.RequestCtx, r Request) bool {
			if te.hook != nil {
				te.hook(h, ctx)
			}
			ctx.SetStatusCode(200)
			ctx.SetBodyString("h" + itoa(int(h)) + " " + r.Route.String())
			return false
		}
	}
	hs[HandleRoot] = nil // the edge's own
	e, err := New(Config{Env: &env, Log: slog.New(slog.DiscardHandler), Clock: clock.Real{}, Pipeline: te.pipe, Handlers: hs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	te.Edge = e
	return te
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return string(rune('0'+n/10)) + string(rune('0'+n%10))
}

// answer is one response, read back.
type answer struct {
	status int
	body   string
	header *fasthttp.ResponseHeader
}

// do serves one request from peer (127.0.0.1 when empty) through the
// edge's handler, as the socket layer would hand it over.
func (te *testEdge) do(method, path string, headers ...string) answer {
	return te.doFrom("127.0.0.1", method, path, headers...)
}

func (te *testEdge) doFrom(peer, method, path string, headers ...string) answer {
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(path)
	req.Header.SetHost("127.0.0.1:20128")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(peer), Port: 40000}, nil)
	te.Handler(&ctx)
	var h fasthttp.ResponseHeader
	ctx.Response.Header.CopyTo(&h)
	return answer{status: ctx.Response.StatusCode(), body: string(ctx.Response.Body()), header: &h}
}

// errorCode reads the machine-readable code of an error body in any of
// the three dialects.
func errorCode(t *testing.T, body string) (code string, anthropic, management bool) {
	t.Helper()
	var v struct {
		Type  string `json:"type"`
		Error struct {
			Code string `json:"code"`
			Type string `json:"type"`
		} `json:"error"`
		RequestID *string `json:"requestId"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("error body is not JSON: %v: %s", err, body)
	}
	return v.Error.Code, v.Type == "error", v.RequestID != nil
}

// TestDispatchFollowsTheTable: every doc path of every row reaches the
// row's handler on its route, with a method the row takes.
func TestDispatchFollowsTheTable(t *testing.T) {
	te := newTestEdge(t)
	for _, e := range Endpoints {
		for _, d := range e.Doc {
			m, _ := ParseMethods(d.Methods)
			method := "GET"
			if m&GET == 0 {
				method = "POST"
			}
			path := strings.NewReplacer("{id}", "gpt-x", "{tool}", "svc", "{name}", "agents").Replace(d.Path)
			a := te.do(method, path)
			if e.Handler == HandleRoot {
				if a.status != 200 || !strings.Contains(a.body, `"name":"omniroute"`) {
					t.Errorf("%s %s: %d %s", method, path, a.status, a.body)
				}
				continue
			}
			if want := "h" + itoa(int(e.Handler)) + " " + e.Route.String(); a.status != 200 || a.body != want {
				t.Errorf("%s %s: %d %q, want %q", method, path, a.status, a.body, want)
			}
		}
	}
	if n := len(te.pipe.finished); n == 0 || te.pipe.finished[n-1] != (finishedCall{Management, 200}) {
		t.Errorf("the last request's end was not recorded on its route: %v", te.pipe.finished)
	}
}

// TestNotFoundFromTheTable: a path no row serves is 404 not_found in the
// caller's dialect, naming what the gateway serves; a tree's bare slash
// and a sibling of a path are no rows.
func TestNotFoundFromTheTable(t *testing.T) {
	te := newTestEdge(t)
	cases := []struct {
		path, version string
		anthropic     bool
	}{
		{"/v2/whatever", "", false},
		{"/v1/models/", "", false},
		{"/v1/chat/completions/x", "", false},
		{"/api/servicesx", "", false},
		{"/v1/messages/batches", "", true},
		{"/nope", "2023-06-01", true},
	}
	for _, c := range cases {
		var hdr []string
		if c.version != "" {
			hdr = []string{"Anthropic-Version", c.version}
		}
		a := te.do("GET", c.path, hdr...)
		code, anthropic, _ := errorCode(t, a.body)
		if a.status != 404 || code != "not_found" || anthropic != c.anthropic {
			t.Errorf("%s: %d %s, want 404 not_found anthropic=%v", c.path, a.status, a.body, c.anthropic)
		}
		if !strings.Contains(a.body, ChatPath) || !strings.Contains(a.body, EmbeddingsPath) || !strings.Contains(a.body, ModelsPath+"/{id}") {
			t.Errorf("%s: the 404 does not list the inference paths: %s", c.path, a.body)
		}
		if got := a.header.Peek("Request-Id"); c.anthropic != (len(got) > 0) {
			t.Errorf("%s: Request-Id %q, anthropic=%v", c.path, got, c.anthropic)
		}
	}
	if last := te.pipe.finished[len(te.pipe.finished)-1]; last != (finishedCall{Other, 404}) {
		t.Errorf("a 404 is recorded as %v", last)
	}
}

// TestMethodNotAllowedFromTheTable: a row the edge checks answers 405
// with Allow naming its methods, in its route's dialect, before its
// handler runs; a row whose handler checks its own methods is handed
// every method; HEAD is served as GET.
func TestMethodNotAllowedFromTheTable(t *testing.T) {
	te := newTestEdge(t)
	ran := 0
	te.hook = func(Handler, *fasthttp.RequestCtx) { ran++ }
	for _, e := range Endpoints {
		if e.OwnMethods || e.Methods&POST != 0 {
			continue
		}
		path := e.Path
		if e.Tree {
			path += "/x"
		}
		for _, version := range []string{"", "2023-06-01"} {
			ran = 0
			a := te.do("POST", path, "Anthropic-Version", version)
			code, anthropic, _ := errorCode(t, a.body)
			wantAnthropic := e.Route.Spec().Dialect == DialectCaller && version != ""
			if a.status != 405 || code != "method_not_allowed" || string(a.header.Peek("Allow")) != e.Methods.String() || anthropic != wantAnthropic || ran != 0 {
				t.Errorf("POST %s (anthropic-version %q): %d %s Allow %q ran %d", path, version, a.status, a.body, a.header.Peek("Allow"), ran)
			}
			if !strings.Contains(a.body, "use "+e.Methods.join(" or ")) {
				t.Errorf("POST %s: the message does not name the methods: %s", path, a.body)
			}
		}
		if a := te.do("HEAD", path); a.status != 200 {
			t.Errorf("HEAD %s: %d", path, a.status)
		}
	}
	if a := te.do("POST", RootPath); string(a.header.Peek("Allow")) != "GET, HEAD" || !strings.Contains(a.body, "use GET or HEAD") {
		t.Errorf("POST /: %d %s Allow %q", a.status, a.body, a.header.Peek("Allow"))
	}
	for _, c := range []struct{ method, path string }{{"GET", ChatPath}, {"DELETE", KeysPath}, {"POST", HealthPath}, {"PUT", DashboardPath}} {
		ran = 0
		if a := te.do(c.method, c.path); a.status != 200 || ran != 1 {
			t.Errorf("%s %s: %d, handler ran %d times; its handler answers the method", c.method, c.path, a.status, ran)
		}
	}
	var method []byte
	te.hook = func(_ Handler, ctx *fasthttp.RequestCtx) { method = append(method[:0], ctx.Method()...) }
	if te.do("HEAD", ModelsPath); string(method) != "GET" {
		t.Errorf("HEAD reached the handler as %q", method)
	}
}

// TestGuardOrder: the browser policy runs before routing, the method
// check and the handler: a forged Host or Origin is refused 403 on any
// path, in the route's dialect, and the operator routes also refuse a
// cross-site page; an allowed origin's preflight is answered by the edge.
func TestGuardOrder(t *testing.T) {
	te := newTestEdge(t, "OMNIROUTE_CORS_ORIGINS", "http://app.test:5173")
	ran := 0
	te.hook = func(Handler, *fasthttp.RequestCtx) { ran++ }
	cases := []struct {
		name, method, path string
		headers            []string
		status             int
		code               string
		management         bool
	}{
		{"rebinding host on chat", "POST", ChatPath, []string{"Host", "evil.example"}, 403, "host_not_allowed", false},
		{"rebinding host before 404", "GET", "/nope", []string{"Host", "evil.example"}, 403, "host_not_allowed", false},
		{"rebinding host before 405", "POST", MetricsPath, []string{"Host", "evil.example"}, 403, "host_not_allowed", false},
		{"rebinding host on keys", "GET", KeysPath, []string{"Host", "evil.example"}, 403, "host_not_allowed", true},
		{"foreign origin", "POST", ChatPath, []string{"Origin", "http://evil.example"}, 403, "origin_not_allowed", false},
		{"foreign origin before 405", "POST", ModelsPath, []string{"Origin", "http://evil.example"}, 403, "origin_not_allowed", false},
		{"cross-site page on services", "POST", ServicesPath + "/svc/start", []string{"Sec-Fetch-Site", "cross-site"}, 403, "origin_not_allowed", true},
		{"cross-site page on the dashboard", "GET", DashboardPath, []string{"Sec-Fetch-Site", "cross-site"}, 403, "origin_not_allowed", true},
	}
	for _, c := range cases {
		ran = 0
		a := te.do(c.method, c.path, c.headers...)
		code, _, management := errorCode(t, a.body)
		if a.status != c.status || code != c.code || management != c.management || ran != 0 {
			t.Errorf("%s: %d %s (handler ran %d times)", c.name, a.status, a.body, ran)
		}
	}
	// Inference takes a cross-site fetch without Origin (no browser page
	// can send it a JSON body); the handler runs.
	ran = 0
	if a := te.do("POST", ChatPath, "Sec-Fetch-Site", "cross-site"); a.status != 200 || ran != 1 {
		t.Errorf("cross-site fetch on chat: %d, handler ran %d times", a.status, ran)
	}
	ran = 0
	a := te.do("OPTIONS", ChatPath, "Origin", "http://app.test:5173", "Access-Control-Request-Method", "POST")
	if a.status != 204 || string(a.header.Peek("Access-Control-Allow-Origin")) != "http://app.test:5173" || ran != 0 {
		t.Errorf("preflight: %d %q, handler ran %d times", a.status, a.header.Peek("Access-Control-Allow-Origin"), ran)
	}
}

// TestPanicAnswers500: a handler's panic is answered 500 internal_error
// in the route's dialect with the request id, the connection is closed,
// and the pipeline logs it and records the request as a 500.
func TestPanicAnswers500(t *testing.T) {
	te := newTestEdge(t)
	te.hook = func(_ Handler, ctx *fasthttp.RequestCtx) {
		ctx.SetBodyString("half written")
		panic("boom")
	}
	cases := []struct {
		path                  string
		route                 Route
		anthropic, management bool
	}{
		{ChatPath, Chat, false, false},
		{MessagesPath, Messages, true, false},
		{CountTokensPath, CountTokens, true, false},
		{ServicesPath, Management, false, true},
		{ModelsPath, Models, false, false},
	}
	for _, c := range cases {
		te.pipe.finished, te.pipe.panicked = nil, nil
		method := "POST"
		if c.path == ServicesPath || c.path == ModelsPath {
			method = "GET"
		}
		a := te.do(method, c.path, "X-Request-Id", "rid-"+c.route.String())
		code, anthropic, management := errorCode(t, a.body)
		if a.status != 500 || code != "internal_error" || anthropic != c.anthropic || management != c.management {
			t.Errorf("%s: %d %s", c.path, a.status, a.body)
		}
		if string(a.header.Peek("X-Request-Id")) != "rid-"+c.route.String() || !a.header.ConnectionClose() {
			t.Errorf("%s: X-Request-Id %q, Connection close %v", c.path, a.header.Peek("X-Request-Id"), a.header.ConnectionClose())
		}
		if c.anthropic && string(a.header.Peek("Request-Id")) != "rid-"+c.route.String() {
			t.Errorf("%s: no Request-Id on an Anthropic-dialect 500", c.path)
		}
		if len(te.pipe.panicked) != 1 || te.pipe.panicked[0] != c.route.String()+"/handler" ||
			len(te.pipe.finished) != 1 || te.pipe.finished[0] != (finishedCall{c.route, 500}) {
			t.Errorf("%s: panicked %v finished %v", c.path, te.pipe.panicked, te.pipe.finished)
		}
	}
	restore := SetPanicProbe(func(where string) { panic("probe at " + where) })
	defer restore()
	te.hook = nil
	if a := te.do("GET", "/nope"); a.status != 500 {
		t.Errorf("a panic before routing: %d %s", a.status, a.body)
	}
}

// TestExpectDecidesBeforeTheBody: an Expect: 100-continue upload is
// decided by the pipeline for the routes it admits, by the hard cap for
// others, refused while draining, and a panic there is a 500.
func TestExpectDecidesBeforeTheBody(t *testing.T) {
	te := newTestEdge(t)
	hardMax := int(te.env.Ingest.HardMaxBodyBytes)
	te.pipe.expect = func(ctx *fasthttp.RequestCtx) (int, bool) {
		switch string(ctx.Path()) {
		case ChatPath:
			return 429, true
		case "/boom":
			panic("expect")
		}
		return 0, false
	}
	ask := func(path string, length int) int {
		var ctx fasthttp.RequestCtx
		var req fasthttp.Request
		req.Header.SetMethod("POST")
		req.SetRequestURI(path)
		req.Header.SetContentLength(length)
		ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, nil)
		return te.expect(&ctx)
	}
	if s := ask(ChatPath, 10); s != 429 {
		t.Errorf("chat: %d, want the pipeline's 429", s)
	}
	if s := ask(KeysPath, 10); s != 100 {
		t.Errorf("keys: %d, want 100", s)
	}
	if s := ask(KeysPath, hardMax+1); s != 413 {
		t.Errorf("keys over the cap: %d, want 413", s)
	}
	if s := ask("/boom", 10); s != 500 || len(te.pipe.panicked) != 1 {
		t.Errorf("a panicking decision: %d, panics %v", s, te.pipe.panicked)
	}
	te.MarkDraining()
	if s := ask(KeysPath, 10); s != 503 || !te.Draining() {
		t.Errorf("draining: %d", s)
	}
}

// TestServeAndShutdown: the edge serves real HTTP over loopback until
// Shutdown, and Serve after Shutdown fails at once.
func TestServeAndShutdown(t *testing.T) {
	te := newTestEdge(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- te.Serve(ln) }()
	tr := &http.Transport{}
	resp, err := (&http.Client{Transport: tr}).Get("http://" + ln.Addr().String() + ModelsPath)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	tr.CloseIdleConnections()
	if resp.StatusCode != 200 || string(body) != "h"+itoa(int(HandleModels))+" models" || resp.Header.Get("X-Request-Id") == "" {
		t.Fatalf("GET over loopback: %d %s", resp.StatusCode, body)
	}
	if err := te.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-done // Serve returns once the listener is closed
	if !te.Draining() {
		t.Error("Shutdown must leave the edge draining")
	}
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := te.Serve(ln2); err == nil {
		t.Fatal("Serve after Shutdown must fail")
	}
}

// TestNewRefusesAMissingHandler: a gateway that leaves a row of the
// table without a handler cannot build its edge.
func TestNewRefusesAMissingHandler(t *testing.T) {
	env, err := config.LoadEnv(map[string]string{"OMNIROUTE_DATA_DIR": t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var hs [NumHandlers]HandlerFunc
	for h := range hs {
		hs[h] = func(*fasthttp.RequestCtx, Request) bool { return false }
	}
	hs[HandleKeys] = nil
	_, err = New(Config{Env: &env, Log: slog.New(slog.DiscardHandler), Clock: clock.Real{}, Pipeline: &stubPipeline{}, Handlers: hs})
	if err == nil || !strings.Contains(err.Error(), "handler") {
		t.Fatalf("New with a missing handler: %v", err)
	}
}
