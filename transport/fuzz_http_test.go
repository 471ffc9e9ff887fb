package transport_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// FuzzHTTPRequest writes raw bytes to the gateway's fasthttp server on a
// loopback listener, as a client on the network could. Whatever they are:
// the gateway does not panic (omniroute_request_panics_total stays 0); every
// answer to a request it refuses is a 4xx or 5xx whose JSON body carries a
// machine-readable error code; a complete request head always gets an
// answer; and no ingest budget stays reserved afterwards.
func FuzzHTTPRequest(f *testing.F) {
	body := `{"model":"echo","messages":[{"role":"user","content":"hi"}]}`
	heavy := strings.Repeat("a", 300<<10)
	for _, s := range []string{
		"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 62\r\n\r\n" + body,
		"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 62\r\n\r\n" + body,
		"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\n{\"mo",
		"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 300000\r\n\r\n" + heavy[:1000],
		"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"mod\r\nzz\r\n",
		"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 99999999999\r\n\r\n",
		"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 62\r\nExpect: 100-continue\r\n\r\n" + body,
		"POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 45\r\n\r\n{\"model\":\"echo\",\"max_tokens\":1,\"max_tokens\":2}",
		"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nAnthropic-Version: 2023-06-01\r\n\r\n",
		"GET /api/services HTTP/1.1\r\nHost: rebind.example\r\n\r\n",
		"OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://evil.example\r\nAccess-Control-Request-Method: POST\r\n\r\n",
		"DELETE /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
		"GET /nope HTTP/1.0\r\n\r\n",
		"GET / HTTP/1.1\r\nBad Header\r\n\r\n",
		"GET /" + strings.Repeat("x", 9000) + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
		"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nX: " + strings.Repeat("y", 20000) + "\r\n\r\n",
		"\x00\x01\x02 / HTTP/9.9\r\n\r\n",
		"POST /api/services/x/auto-start HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: 16\r\n\r\n{\"enabled\":true}",
		"",
		"\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	resetMock(f)
	g := startGatewayTB(f, testFile(f, ""), map[string]string{"OMNIROUTE_HEADER_TIMEOUT_MS": "1000"})
	addr := strings.TrimPrefix(g.base, "http://")
	f.Fuzz(func(t *testing.T, raw []byte) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Write(raw); err != nil && !errors.Is(err, net.ErrClosed) {
			// the gateway may close early (a refused upload): fine
		}
		_ = conn.(*net.TCPConn).CloseWrite()
		br := bufio.NewReader(conn)
		answers := 0
		for {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				break
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 100 {
				continue
			}
			answers++
			if resp.StatusCode >= 400 && resp.StatusCode != 499 {
				if code, _ := jsonField(t, b, "error", "code").(string); code == "" {
					t.Fatalf("%d without an error code for %q: %s", resp.StatusCode, raw, b)
				}
			}
		}
		if answers == 0 && completeHead(raw) {
			t.Fatalf("no answer to a complete request head: %q", raw)
		}
		if n := g.gw.Panics(); n != 0 {
			t.Fatalf("a request panicked (%d) on input %q", n, raw)
		}
		deadline := time.Now().Add(5 * time.Second)
		for g.gw.Ingest().InflightBytes() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d ingest bytes still reserved after %q", g.gw.Ingest().InflightBytes(), raw)
			}
			time.Sleep(time.Millisecond)
		}
	})
}

// completeHead reports input that starts with a request line and a whole
// header block: a server must answer it (anything shorter may be an
// unfinished request the client abandoned).
func completeHead(raw []byte) bool {
	i := bytes.Index(raw, []byte("\r\n\r\n"))
	if i <= 0 {
		return false
	}
	line, _, _ := bytes.Cut(raw[:i], []byte("\r\n"))
	return len(bytes.TrimSpace(line)) > 0
}
