package transport_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/transport"
	"github.com/omniroute/gateway/transport/gateway"
)

// embedded builds a gateway on a host-owned actor system without serving it.
func embedded(t *testing.T, f *transport.File) (*gateway.Gateway, *actor.ActorSystem) {
	t.Helper()
	// Only exported transport API: what a host in another module can use.
	e, err := transport.LoadEnv(map[string]string{"OMNIROUTE_DATA_DIR": t.TempDir(), "OMNIROUTE_TENANT_SECRET": "test-secret-0123456789"})
	if err != nil {
		t.Fatal(err)
	}
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	gw, err := gateway.New(system, gateway.Options{Env: e, File: f, Getenv: testGetenv})
	if err != nil {
		t.Fatal(err)
	}
	return gw, system
}

func TestEmbedOnHostFasthttpServer(t *testing.T) {
	resetMock(t)
	gw, system := embedded(t, testFile(t, ""))
	host := &fasthttp.Server{}
	gw.ServerConfig(host) // the gateway's body-streaming and 100-continue settings
	host.Handler = func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/host/ping" {
			ctx.SetBodyString("pong")
			return
		}
		gw.Handler(ctx)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- host.Serve(ln) }()
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	base := "http://" + ln.Addr().String()

	resp, err := hc.Get(base + "/host/ping")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "pong" {
		t.Fatalf("host route: %q", b)
	}
	resp, err = hc.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"echo","stream":true,"messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if evs := sseEvents(b); resp.StatusCode != 200 || len(evs) < 3 || evs[len(evs)-1][1] != "[DONE]" {
		t.Fatalf("embedded stream: %d %s", resp.StatusCode, b)
	}
	hc.CloseIdleConnections()
	if err := host.Shutdown(); err != nil {
		t.Fatal(err)
	}
	<-done
	gw.Close()
	system.Shutdown()
}

func TestEmbedAsNetHTTPHandler(t *testing.T) {
	resetMock(t)
	f := testFile(t, `,
    "hang-nethttp": {"targets": [{"connection": "mock/a", "model": "m-hang-nethttp"}]}`)
	gw, system := embedded(t, f)
	mux := http.NewServeMux()
	mux.Handle("/v1/", gw.HTTPHandler())
	mux.HandleFunc("/host/ping", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "pong") })
	srv := httptest.NewServer(mux)
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	defer func() {
		hc.CloseIdleConnections()
		srv.Close()
		gw.Close()
		system.Shutdown()
	}()

	// Non-streaming, with the exact body reaching the provider.
	body := `{"model":"echo", "messages":[{"role":"user","content":"net/http"}]}`
	resp, err := hc.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Request-Id") == "" || jsonField(t, b, "object") != "chat.completion" {
		t.Fatalf("net/http chat: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	st := mockStats(t)
	if rec := st.Bodies[len(st.Bodies)-1]; rec.SHA256 != sha([]byte(strings.Replace(body, `"echo"`, `"m-echo"`, 1))) {
		t.Fatal("body changed through the net/http adapter")
	}

	// Streaming: one event per flush reaches the client.
	resp, err = hc.Post(srv.URL+"/v1/messages", "application/json", strings.NewReader(`{"model":"claude","stream":true,"max_tokens":5,"messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if evs := sseEvents(b); len(evs) < 5 || evs[len(evs)-1][0] != "message_stop" {
		t.Fatalf("net/http stream: %s", b)
	}

	// A client that leaves cancels the upstream request.
	setBehavior(t, map[string]mockprovider.Behavior{"m-hang-nethttp": {Fail: mockprovider.FailSpec{Mode: "hang"}}})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"hang-nethttp","messages":[]}`))
	req.Header.Set("Content-Type", "application/json")
	errc := make(chan error, 1)
	go func() {
		_, err := hc.Do(req)
		errc <- err
	}()
	waitFor(t, "request in flight", func() bool { return mockStats(t).Models["m-hang-nethttp"].Inflight == 1 })
	cancel()
	<-errc
	waitFor(t, "upstream cancelled", func() bool { return mockStats(t).Models["m-hang-nethttp"].Cancelled == 1 })
}
