// Package relay holds the pure parts of POST /api/v1/relay/chat/completions:
// relay tokens (kept only as SHA-256, with expiry, allowed models and a
// per-token rate limit), the per-base-URL failure cooldown of the Bifrost
// sidecar, the provider manifest that says which requests Bifrost may
// serve, and the rule that tells a relay failure from a provider error it
// passed on.
//
// Everything here is safe for concurrent use without locks on the request
// path: token lookups read an immutable map, the rate limiter is one
// atomic (GCRA), and cooldowns are atomics in a map that only grows by the
// handful of base URLs a gateway knows.
package relay

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/config"
)

// Fallback is why a relay request Bifrost could have served was served
// by the native pipeline: the relay's family of fallback reasons.
type Fallback uint8

// Fallback reasons (ReasonNone: no fallback).
const (
	ReasonNone Fallback = iota
	ReasonCooldown
	ReasonError
	ReasonIneligible
	ReasonProviderUnknown
	NumFallbacks
)

// fallbacks is the one table of the fallback reasons: each one's code, as
// sent in X-Routing-Fallback-Reason and counted in
// omniroute_relay_fallbacks_total (TestReasonTables).
var fallbacks = [NumFallbacks]string{
	ReasonNone:            "",
	ReasonCooldown:        "bifrost-cooldown",
	ReasonError:           "bifrost-error",
	ReasonIneligible:      "bifrost-ineligible",
	ReasonProviderUnknown: "bifrost-provider-unknown",
}

// String is the reason's code.
func (f Fallback) String() string { return fallbacks[f] }

// Fallbacks lists the fallback reasons (ReasonNone excluded).
func Fallbacks() []Fallback {
	out := make([]Fallback, 0, NumFallbacks-1)
	for f := ReasonNone + 1; f < NumFallbacks; f++ {
		out = append(out, f)
	}
	return out
}

// Rejection is why the relay refused a request: the relay's family of
// rejection reasons.
type Rejection uint8

// Rejection reasons.
const (
	RejectMissingToken Rejection = iota
	RejectInvalidToken
	RejectExpiredToken
	RejectRateLimited
	RejectModelNotAllowed
	NumRejections
)

// rejections is the one table of the rejection reasons: each one's name,
// counted in omniroute_relay_rejected_total, and the error the caller
// gets (TestReasonTables).
var rejections = [NumRejections]struct {
	name string
	code apierror.Code
}{
	RejectMissingToken:    {"missing_token", apierror.CodeMissingRelayToken},
	RejectInvalidToken:    {"invalid_token", apierror.CodeInvalidAPIKey},
	RejectExpiredToken:    {"expired_token", apierror.CodeRelayTokenExpired},
	RejectRateLimited:     {"rate_limited", apierror.CodeRateLimitExceeded},
	RejectModelNotAllowed: {"model_not_allowed", apierror.CodeModelNotAllowed},
}

// String is the reason's name (the metric's label).
func (r Rejection) String() string { return rejections[r].name }

// Code is the error a request refused for r is answered with.
func (r Rejection) Code() apierror.Code { return rejections[r].code }

// Rejections lists the rejection reasons.
func Rejections() []Rejection {
	out := make([]Rejection, 0, NumRejections)
	for r := Rejection(0); r < NumRejections; r++ {
		out = append(out, r)
	}
	return out
}

// Token is one relay credential.
type Token struct {
	Name    string
	Expires time.Time // zero: never
	models  []string
	allAll  bool
	Limit   *Limiter // nil: unlimited
}

// Expired reports whether the token is past its expiry at now.
func (t *Token) Expired(now time.Time) bool { return !t.Expires.IsZero() && !now.Before(t.Expires) }

// Allows reports whether the token may call model: an exact entry, a
// prefix entry ending in "*", or no restriction.
func (t *Token) Allows(model string) bool {
	if t.allAll {
		return true
	}
	for _, p := range t.models {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(model, prefix) {
				return true
			}
		} else if p == model {
			return true
		}
	}
	return false
}

// Tokens is the immutable set of relay tokens, keyed by SHA-256.
type Tokens struct {
	byHash map[[32]byte]*Token
}

// NewTokens resolves the configured tokens; token_env variables are read
// through getenv and only their hash is kept.
func NewTokens(cfg []config.RelayToken, getenv func(string) (string, bool)) (*Tokens, error) {
	ts := &Tokens{byHash: map[[32]byte]*Token{}}
	for i, c := range cfg {
		var h [32]byte
		if c.TokenEnv != "" {
			v, ok := getenv(c.TokenEnv)
			if !ok || v == "" {
				return nil, fmt.Errorf("relay.tokens[%d].token_env: environment variable %s is not set; export the relay token there", i, c.TokenEnv)
			}
			h = sha256.Sum256([]byte(v))
		} else if _, err := hex.Decode(h[:], []byte(c.TokenSHA256)); err != nil {
			return nil, fmt.Errorf("relay.tokens[%d].token_sha256: %v", i, err)
		}
		if _, dup := ts.byHash[h]; dup {
			return nil, fmt.Errorf("relay.tokens[%d]: the same token is configured twice", i)
		}
		t := &Token{Name: c.Name, models: c.Models, allAll: len(c.Models) == 0}
		for _, m := range c.Models {
			if m == "*" {
				t.allAll = true
			}
		}
		if c.ExpiresAt != "" {
			exp, err := time.Parse(time.RFC3339, c.ExpiresAt)
			if err != nil {
				return nil, fmt.Errorf("relay.tokens[%d].expires_at: %v", i, err)
			}
			t.Expires = exp
		}
		if rl := c.RateLimit; rl != nil {
			t.Limit = NewLimiter(rl.Requests, time.Duration(rl.WindowMs)*time.Millisecond)
		}
		ts.byHash[h] = t
	}
	return ts, nil
}

// Len returns the number of tokens.
func (ts *Tokens) Len() int { return len(ts.byHash) }

// Lookup returns the token whose SHA-256 equals that of raw, or nil. The
// raw token is hashed first, so the map compare never touches the secret.
func (ts *Tokens) Lookup(raw []byte) *Token {
	if ts == nil || len(raw) == 0 {
		return nil
	}
	return ts.byHash[sha256.Sum256(raw)]
}

// Limiter is a generic cell rate algorithm limiter: requests per window,
// bursts up to requests, one atomic per token. Its Retry-After is exact.
type Limiter struct {
	Requests int
	interval int64 // ns per request
	window   int64 // ns
	tat      atomic.Int64
}

// NewLimiter allows requests per window.
func NewLimiter(requests int, window time.Duration) *Limiter {
	return &Limiter{Requests: requests, interval: int64(window) / int64(requests), window: int64(window)}
}

// Allow admits one request at now, or says how long until one would be.
func (l *Limiter) Allow(now time.Time) (ok bool, retryAfter time.Duration, remaining int) {
	n := now.UnixNano()
	for {
		old := l.tat.Load()
		tat := max(old, n)
		next := tat + l.interval
		ahead := next - n
		if ahead > l.window {
			return false, time.Duration(ahead - l.window), 0
		}
		if l.tat.CompareAndSwap(old, next) {
			return true, 0, int((l.window - ahead) / l.interval)
		}
	}
}

// Cooldowns remembers, per relay base URL, until when it is cooling after
// a failure.
type Cooldowns struct {
	mu sync.RWMutex
	m  map[string]*atomic.Int64 // unix ns; 0 = none
}

func (c *Cooldowns) slot(base string, create bool) *atomic.Int64 {
	c.mu.RLock()
	s := c.m[base]
	c.mu.RUnlock()
	if s != nil || !create {
		return s
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*atomic.Int64{}
	}
	if s = c.m[base]; s == nil {
		s = new(atomic.Int64)
		c.m[base] = s
	}
	return s
}

// Record cools base for d from now (d ≤ 0 clears it). A later deadline
// already recorded is kept.
func (c *Cooldowns) Record(base string, now time.Time, d time.Duration) {
	if d <= 0 {
		c.Clear(base)
		return
	}
	s := c.slot(base, true)
	until := now.Add(d).UnixNano()
	for {
		old := s.Load()
		if old >= until || s.CompareAndSwap(old, until) {
			return
		}
	}
}

// Remaining returns how long base still cools at now (0: not cooling).
func (c *Cooldowns) Remaining(base string, now time.Time) time.Duration {
	s := c.slot(base, false)
	if s == nil {
		return 0
	}
	if d := s.Load() - now.UnixNano(); d > 0 {
		return time.Duration(d)
	}
	return 0
}

// Clear ends base's cooldown.
func (c *Cooldowns) Clear(base string) {
	if s := c.slot(base, false); s != nil {
		s.Store(0)
	}
}

// Manifest is the provider manifest: which providers the relay backend may
// serve.
type Manifest map[string]config.RelayProvider

// Eligibility answers for provider: eligible, or the fallback reason.
func (m Manifest) Eligibility(provider string) (eligible bool, reason Fallback) {
	p, ok := m[provider]
	switch {
	case !ok || provider == "":
		return false, ReasonProviderUnknown
	case !p.Bifrost:
		return false, ReasonIneligible
	}
	return true, ReasonNone
}

// ProviderError reports whether a non-2xx relay answer carries an error
// from the provider behind the relay (to pass on, without cooling the
// relay) rather than a failure of the relay itself. Statuses below 500 are
// always the provider's or the request's. A 5xx is the provider's only
// when the body is a JSON object with an "error" member and does not say
// "is_bifrost_error": true (Bifrost's own failures); an empty, HTML or
// plain-text 5xx (a crashed sidecar, a proxy's 502 page) is the relay's.
func ProviderError(status int, body []byte) bool {
	if status < 500 {
		return true
	}
	b := bytes.TrimSpace(body)
	if len(b) == 0 || b[0] != '{' {
		return false
	}
	var v struct {
		Error          json.RawMessage `json:"error"`
		IsBifrostError *bool           `json:"is_bifrost_error"`
	}
	if json.Unmarshal(b, &v) != nil || len(v.Error) == 0 || string(v.Error) == "null" {
		return false
	}
	return v.IsBifrostError == nil || !*v.IsBifrostError
}
