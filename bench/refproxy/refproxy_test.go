package refproxy

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/internal/testutil/mocktest"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func TestProxiesJSONAndStreams(t *testing.T) {
	_, addr := mocktest.Start(t, mockprovider.Options{}, nil)
	p := New(addr)
	defer p.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: p.Handler}
	go srv.Serve(ln)     //nolint:errcheck
	defer srv.Shutdown() //nolint:errcheck
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	defer hc.CloseIdleConnections()

	for _, tc := range []struct{ body, want string }{
		{`{"model":"m","messages":[]}`, `"chat.completion"`},
		{`{"model":"m","stream":true,"messages":[]}`, "data: [DONE]"},
	} {
		resp, err := hc.Post("http://"+ln.Addr().String()+"/v1/chat/completions", "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), tc.want) {
			t.Fatalf("%s: %d %s", tc.body, resp.StatusCode, b)
		}
	}
}

func TestMainUsage(t *testing.T) {
	var out, errb strings.Builder
	if code := Main([]string{"--listen", "127.0.0.1:0"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--upstream") {
		t.Fatalf("no upstream: code %d, %q", code, errb.String())
	}
	if code := Main([]string{"--upstream", "127.0.0.1:1", "--listen", "256.0.0.1:0"}, &out, &errb); code != 1 {
		t.Fatalf("bad listen address: code %d", code)
	}
}
