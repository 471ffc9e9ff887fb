package mockprovider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/valyala/fasthttp"
)

// QuotaAPIs sets what the mock's provider usage APIs answer:
// GET /api/v1/key and /api/v1/credits (OpenRouter; also under /v1/), and
// GET /user/balance (DeepSeek). A nil field keeps the default answer.
type QuotaAPIs struct {
	// OpenRouterKey is the "data" object of GET /api/v1/key.
	OpenRouterKey json.RawMessage `json:"openrouter_key,omitempty"`
	// OpenRouterCredits is the "data" object of GET /api/v1/credits.
	OpenRouterCredits json.RawMessage `json:"openrouter_credits,omitempty"`
	// DeepSeekBalance is the whole body of GET /user/balance.
	DeepSeekBalance json.RawMessage `json:"deepseek_balance,omitempty"`
	// Status, when not 0, answers every usage API with this status and an
	// error body (to exercise pollers' backoff).
	Status int `json:"status,omitempty"`
}

// QuotaAPIStats counts the usage-API requests the mock served.
type QuotaAPIStats struct {
	Key     int64 `json:"key"`
	Credits int64 `json:"credits"`
	Balance int64 `json:"balance"`
	// Unauthenticated counts requests without a bearer token.
	Unauthenticated int64 `json:"unauthenticated"`
}

// QuotaAPIState is the body of GET /_mock/quota.
type QuotaAPIState struct {
	Config   QuotaAPIs     `json:"config"`
	Requests QuotaAPIStats `json:"requests"`
}

var (
	defaultORKey     = json.RawMessage(`{"label":"sk-or-v1-mock...","limit":null,"limit_remaining":null,"limit_reset":null,"include_byok_in_limit":false,"usage":0,"usage_daily":0,"usage_weekly":0,"usage_monthly":0,"is_free_tier":false}`)
	defaultORCredits = json.RawMessage(`{"total_credits":100,"total_usage":0}`)
	defaultDSBalance = json.RawMessage(`{"is_available":true,"balance_infos":[{"currency":"USD","total_balance":"100.00","granted_balance":"0.00","topped_up_balance":"100.00"}]}`)
)

type quotaAPIState struct {
	mu              sync.Mutex
	cfg             QuotaAPIs
	key, credits    atomic.Int64
	balance, unauth atomic.Int64
}

func (q *quotaAPIState) set(c QuotaAPIs) {
	q.mu.Lock()
	q.cfg = c
	q.mu.Unlock()
}

func (q *quotaAPIState) get() QuotaAPIs {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.cfg
}

func (q *quotaAPIState) reset() {
	q.set(QuotaAPIs{})
	q.key.Store(0)
	q.credits.Store(0)
	q.balance.Store(0)
	q.unauth.Store(0)
}

func (q *quotaAPIState) snapshot() QuotaAPIState {
	return QuotaAPIState{Config: q.get(), Requests: QuotaAPIStats{Key: q.key.Load(), Credits: q.credits.Load(), Balance: q.balance.Load(), Unauthenticated: q.unauth.Load()}}
}

// Validate checks that the configured bodies are JSON objects.
func (c QuotaAPIs) Validate() error {
	for name, raw := range map[string]json.RawMessage{"openrouter_key": c.OpenRouterKey, "openrouter_credits": c.OpenRouterCredits, "deepseek_balance": c.DeepSeekBalance} {
		if raw == nil {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("invalid quota APIs: %s must be a JSON object: %v", name, err)
		}
	}
	if c.Status != 0 && (c.Status < 200 || c.Status > 599) {
		return fmt.Errorf("invalid quota APIs: status %d is not an HTTP status", c.Status)
	}
	return nil
}

// SetQuotaAPIs sets the usage-API answers in process (POST /_mock/quota
// does the same).
func (s *Server) SetQuotaAPIs(c QuotaAPIs) error {
	if err := c.Validate(); err != nil {
		return err
	}
	s.quotaAPIs.set(c)
	return nil
}

// QuotaAPIState returns the usage-API answers and request counts in
// process (GET /_mock/quota gives the same).
func (s *Server) QuotaAPIState() QuotaAPIState { return s.quotaAPIs.snapshot() }

// serveQuotaAPI answers one usage-API request; which is "key", "credits"
// or "balance".
func (s *Server) serveQuotaAPI(ctx *fasthttp.RequestCtx, which string) {
	q := &s.quotaAPIs
	if !ctx.IsGet() {
		writeError(ctx, familyOpenAI, errInfo{status: fasthttp.StatusMethodNotAllowed, msg: "mockprovider: " + string(ctx.Path()) + " accepts GET only"})
		return
	}
	switch which {
	case "key":
		q.key.Add(1)
	case "credits":
		q.credits.Add(1)
	default:
		q.balance.Add(1)
	}
	if a := ctx.Request.Header.Peek(fasthttp.HeaderAuthorization); len(a) < 8 || !bytes.EqualFold(a[:7], []byte("bearer ")) {
		q.unauth.Add(1)
		writeError(ctx, familyOpenAI, errInfo{status: fasthttp.StatusUnauthorized, msg: "mockprovider: no bearer token"})
		return
	}
	c := q.get()
	if c.Status != 0 {
		writeError(ctx, familyOpenAI, errInfo{status: c.Status, msg: "mockprovider: usage API failure (injected)"})
		return
	}
	var body []byte
	switch which {
	case "key":
		body = wrapData(orDefault(c.OpenRouterKey, defaultORKey))
	case "credits":
		body = wrapData(orDefault(c.OpenRouterCredits, defaultORCredits))
	default:
		body = orDefault(c.DeepSeekBalance, defaultDSBalance)
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentTypeBytes(contentTypeJSON)
	ctx.SetBody(body)
}

func orDefault(v, def json.RawMessage) json.RawMessage {
	if v == nil {
		return def
	}
	return v
}

func wrapData(data json.RawMessage) []byte {
	out := append([]byte(`{"data":`), data...)
	return append(out, '}')
}

// quotaAdmin serves GET and POST /_mock/quota.
func (s *Server) quotaAdmin(ctx *fasthttp.RequestCtx) {
	if ctx.IsGet() {
		writeJSON(ctx, fasthttp.StatusOK, s.quotaAPIs.snapshot())
		return
	}
	adminPost(ctx, "quota APIs", s.SetQuotaAPIs, func() any { return s.quotaAPIs.snapshot() })
}
