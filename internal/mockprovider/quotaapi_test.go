package mockprovider

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func (e *testEnv) get(t *testing.T, path, auth string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.base+path, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestQuotaAPIs(t *testing.T) {
	e := newEnv(t, Behavior{})
	// Defaults: an unlimited OpenRouter key, 100 credits, a DeepSeek balance.
	for _, path := range []string{"/api/v1/key", "/v1/key"} {
		if st, body := e.get(t, path, "Bearer k"); st != 200 || !strings.Contains(body, `"data":{"label"`) {
			t.Fatalf("%s: %d %s", path, st, body)
		}
	}
	if st, body := e.get(t, "/api/v1/credits", "Bearer k"); st != 200 || body != `{"data":{"total_credits":100,"total_usage":0}}` {
		t.Fatalf("credits: %d %s", st, body)
	}
	if st, body := e.get(t, "/user/balance", "Bearer k"); st != 200 || !strings.Contains(body, `"is_available":true`) {
		t.Fatalf("balance: %d %s", st, body)
	}
	if st, _ := e.get(t, "/user/balance", ""); st != 401 {
		t.Fatalf("no bearer token: %d", st)
	}
	// Controlled through the admin API.
	if err := e.admin.SetQuotaAPIs(QuotaAPIs{OpenRouterKey: json.RawMessage(`{"limit":10,"limit_remaining":0}`), DeepSeekBalance: json.RawMessage(`{"is_available":false,"balance_infos":[]}`)}); err != nil {
		t.Fatal(err)
	}
	if _, body := e.get(t, "/api/v1/key", "Bearer k"); body != `{"data":{"limit":10,"limit_remaining":0}}` {
		t.Fatalf("key: %s", body)
	}
	if _, body := e.get(t, "/user/balance", "Bearer k"); body != `{"is_available":false,"balance_infos":[]}` {
		t.Fatalf("balance: %s", body)
	}
	if err := e.admin.SetQuotaAPIs(QuotaAPIs{Status: 503}); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.get(t, "/api/v1/credits", "Bearer k"); st != 503 {
		t.Fatalf("injected failure: %d", st)
	}
	if err := e.admin.SetQuotaAPIs(QuotaAPIs{OpenRouterKey: json.RawMessage(`[1]`)}); err == nil {
		t.Fatal("a non-object body was accepted")
	}
	s, err := e.admin.QuotaAPIs()
	if err != nil || s.Requests.Key != 3 || s.Requests.Credits != 2 || s.Requests.Balance != 3 || s.Requests.Unauthenticated != 1 || s.Config.Status != 503 {
		t.Fatalf("state %+v %v", s, err)
	}
	if err := e.admin.Reset(); err != nil {
		t.Fatal(err)
	}
	if s, _ := e.admin.QuotaAPIs(); s.Requests.Key != 0 || s.Config.Status != 0 {
		t.Fatalf("after reset %+v", s)
	}
}
