package transport_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// rawHead sends HEAD path on its own TCP connection and returns the
// response and every byte that followed its header, read until the
// gateway closes the connection (Connection: close).
func rawHead(t *testing.T, g *gwEnv, path string) (*http.Response, []byte) {
	t.Helper()
	addr := strings.TrimPrefix(g.base, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, "HEAD "+path+" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodHead})
	if err != nil {
		t.Fatalf("HEAD %s: %v", path, err)
	}
	rest, _ := io.ReadAll(br)
	return resp, rest
}

// TestRootAndHead: GET / names the gateway and links the dashboard; HEAD /
// (what Claude Code sends at start) answers 200. HEAD on any GET route
// answers as GET does (status, content type) with no body on the wire,
// and a route that takes no GET refuses HEAD as it refuses GET.
func TestRootAndHead(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, ""), nil)

	r := g.get("/")
	if r.status != 200 || jsonField(t, r.body, "name") != "omniroute" || jsonField(t, r.body, "dashboard") != "/dashboard" {
		t.Fatalf("GET /: %d %s", r.status, r.body)
	}
	r = g.post("/", `{}`)
	if r.status != 405 || r.header.Get("Allow") != "GET, HEAD" || jsonField(t, r.body, "error", "code") == nil {
		t.Fatalf("POST /: %d %v %s", r.status, r.header, r.body)
	}

	for _, path := range []string{"/", "/v1/models", "/v1/models/claude", "/healthz", "/metrics", "/v1/nope", "/v1/messages/batches", "/v1/chat/completions"} {
		get := g.get(path)
		resp, rest := rawHead(t, g, path)
		if resp.StatusCode != get.status {
			t.Errorf("HEAD %s: %d, GET answers %d", path, resp.StatusCode, get.status)
		}
		if ct := resp.Header.Get("Content-Type"); ct != get.header.Get("Content-Type") {
			t.Errorf("HEAD %s: content type %q, GET's %q", path, ct, get.header.Get("Content-Type"))
		}
		if len(rest) != 0 {
			t.Errorf("HEAD %s sent a body: %q", path, rest)
		}
		if path == "/" && resp.StatusCode != 200 {
			t.Errorf("HEAD / answered %d, want 200", resp.StatusCode)
		}
	}

	// Behind net/http (HTTPHandler) too.
	srv := httptest.NewServer(g.gw.HTTPHandler())
	defer srv.Close()
	resp, err := srv.Client().Head(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Errorf("HEAD / behind net/http: %d %v", resp.StatusCode, resp.Header)
	}
}

// TestUnknownPathDialect: a path no route serves answers 404 in the
// dialect its prefix implies: Anthropic's shape under /v1/messages,
// OpenAI's elsewhere under /v1 (and at the top level).
func TestUnknownPathDialect(t *testing.T) {
	resetMock(t)
	g := startGateway(t, testFile(t, ""), nil)
	for path, anthropic := range map[string]bool{
		"/v1/messages/batches":         true,
		"/v1/messages/batches/b1/x":    true,
		"/v1/messages/count_tokens/ab": true,
		"/v1/nope":                     false,
		"/v1/chat/completions/extra":   false,
		"/v1/responses/r1/cancel":      false,
		"/v2/messages":                 false,
		"/nope":                        false,
	} {
		for _, method := range []string{"GET", "POST"} {
			r := g.do(method, path, `{"model":"claude"}`)
			if r.status != 404 {
				t.Errorf("%s %s: %d %s", method, path, r.status, r.body)
				continue
			}
			if anthropic {
				if jsonField(t, r.body, "type") != "error" || jsonField(t, r.body, "error", "type") != "not_found_error" || r.header.Get("Request-Id") == "" {
					t.Errorf("%s %s: not an Anthropic error: %v %s", method, path, r.header, r.body)
				}
				continue
			}
			if jsonField(t, r.body, "error", "code") != "not_found" || jsonField(t, r.body, "type") != nil {
				t.Errorf("%s %s: not an OpenAI error: %s", method, path, r.body)
			}
		}
	}
}
