package mockprovider

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Lets TestStartProcess re-execute this test binary as the mock.
	RunIfChild()
	goleak.VerifyTestMain(m)
}

// testEnv is one running mock plus an HTTP client that is cleaned up with it.
type testEnv struct {
	srv   *Server
	base  string // http://127.0.0.1:PORT
	hc    *http.Client
	admin *Client
}

func newEnv(t *testing.T, def Behavior) *testEnv {
	t.Helper()
	return newEnvWith(t, Options{Default: def})
}

func newEnvWith(t *testing.T, o Options) *testEnv {
	t.Helper()
	srv := New(o)
	addr, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("start mock: %v", err)
	}
	e := &testEnv{srv: srv, base: "http://" + addr, hc: newEnvClient()}
	e.admin = &Client{BaseURL: e.base}
	t.Cleanup(func() {
		e.hc.CloseIdleConnections()
		if err := srv.Close(); err != nil {
			t.Errorf("close mock: %v", err)
		}
	})
	return e
}

// newEnvClient returns a client with its own transport (no proxy), whose idle
// connections the test closes so goleak sees no leftover goroutine.
func newEnvClient() *http.Client {
	return &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 30 * time.Second}
}

func (e *testEnv) setModels(t *testing.T, models map[string]Behavior) {
	t.Helper()
	if err := e.admin.SetBehavior(BehaviorUpdate{Models: models}); err != nil {
		t.Fatalf("set behavior: %v", err)
	}
}

func (e *testEnv) stats(t *testing.T) Stats {
	t.Helper()
	st, err := e.admin.Stats()
	if err != nil {
		t.Fatalf("stats: %v", err)
	}
	return st
}

// waitStats polls the stats until cond holds, failing after a generous bound.
func (e *testEnv) waitStats(t *testing.T, what string, cond func(Stats) bool) Stats {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		st := e.stats(t)
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; stats: %+v", what, st.Totals)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type rawResp struct {
	status  int
	header  http.Header
	body    []byte
	readErr error // error while reading the body (truncation, reset)
}

// post sends body to path and reads the whole answer.
func (e *testEnv) post(t *testing.T, ctx context.Context, path, body string, hdr ...string) (rawResp, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatalf("build request: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		return rawResp{}, err
	}
	defer resp.Body.Close()
	data, rerr := io.ReadAll(resp.Body)
	return rawResp{status: resp.StatusCode, header: resp.Header, body: data, readErr: rerr}, nil
}

func (e *testEnv) mustPost(t *testing.T, path, body string, hdr ...string) rawResp {
	t.Helper()
	r, err := e.post(t, context.Background(), path, body, hdr...)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	return r
}

// sseFrames splits an SSE body into frames.
func sseFrames(body []byte) []string {
	var out []string
	for _, f := range strings.Split(string(body), "\n\n") {
		if strings.TrimSpace(f) != "" {
			out = append(out, f)
		}
	}
	return out
}

func decodeJSONReader(t *testing.T, r io.Reader, v any) {
	t.Helper()
	if err := json.NewDecoder(r).Decode(v); err != nil {
		t.Fatalf("decode: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }
