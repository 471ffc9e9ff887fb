package mockprovider

import (
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
)

// rateConf is a RateLimitSpec with defaults applied.
type rateConf struct {
	family             string
	limitReq, limitTok int64
	window             time.Duration
	pinReq, pinTok     *int64
	enforce            bool
}

func newRateConf(s RateLimitSpec) rateConf {
	c := rateConf{family: s.Family, limitReq: int64(s.LimitRequests), limitTok: int64(s.LimitTokens),
		window: time.Duration(s.WindowMS) * time.Millisecond, enforce: s.Enforce}
	if c.limitReq == 0 {
		c.limitReq = 1000
	}
	if c.limitTok == 0 {
		c.limitTok = 100000
	}
	if c.window == 0 {
		c.window = time.Minute
	}
	if s.RemainingRequests != nil {
		v := int64(*s.RemainingRequests)
		c.pinReq = &v
	}
	if s.RemainingTokens != nil {
		v := int64(*s.RemainingTokens)
		c.pinTok = &v
	}
	return c
}

// rateWindow is one model's usage inside the current window. It belongs to
// the compiled behaviour that opened it, so changing a model's behaviour
// starts a fresh window.
type rateWindow struct {
	owner              *compiled
	start              time.Time
	reqs, tokIn, tokOu int64
}

// rateSnap is the state reported on one response.
type rateSnap struct {
	conf                         *rateConf
	remReq, remTok, remIn, remOu int64
	reset                        time.Duration // until the window refills
	resetAt                      time.Time
	exhausted                    bool // Enforce is on and nothing is left: answer 429
}

// charge counts one request of in prompt and out completion tokens against
// the model's window and returns what the response headers report. With
// Enforce, an exhausted window is not charged and the snapshot says so.
func (m *modelEntry) charge(c *compiled, now time.Time, in, out int64) rateSnap {
	rc := &c.rl
	m.mu.Lock()
	w := &m.rate
	if w.owner != c || now.Sub(w.start) >= rc.window {
		*w = rateWindow{owner: c, start: now}
	}
	snap := rateSnap{conf: rc}
	if rc.enforce {
		reqGone := w.reqs >= rc.limitReq || (rc.pinReq != nil && *rc.pinReq == 0)
		tokGone := w.tokIn+w.tokOu >= rc.limitTok || (rc.pinTok != nil && *rc.pinTok == 0)
		snap.exhausted = reqGone || tokGone
	}
	if !snap.exhausted {
		w.reqs++
		w.tokIn += in
		w.tokOu += out
	}
	snap.remReq = max(0, rc.limitReq-w.reqs)
	snap.remTok = max(0, rc.limitTok-w.tokIn-w.tokOu)
	snap.remIn = max(0, rc.limitTok-w.tokIn)
	snap.remOu = max(0, rc.limitTok-w.tokOu)
	snap.resetAt = w.start.Add(rc.window)
	m.mu.Unlock()
	snap.reset = max(0, snap.resetAt.Sub(now))
	if rc.pinReq != nil {
		snap.remReq = *rc.pinReq
	}
	if rc.pinTok != nil {
		snap.remTok, snap.remIn, snap.remOu = *rc.pinTok, *rc.pinTok, *rc.pinTok
	}
	return snap
}

// retryAfterSeconds is the whole seconds until the window refills (at least 1).
func (s *rateSnap) retryAfterSeconds() int64 {
	return max(1, int64((s.reset+time.Second-1)/time.Second))
}

// anthropicRateHeaders are the {limit, remaining, reset} names per dimension:
// requests, tokens, input tokens, output tokens.
var anthropicRateHeaders = [...][3]string{
	{"anthropic-ratelimit-requests-limit", "anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset"},
	{"anthropic-ratelimit-tokens-limit", "anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset"},
	{"anthropic-ratelimit-input-tokens-limit", "anthropic-ratelimit-input-tokens-remaining", "anthropic-ratelimit-input-tokens-reset"},
	{"anthropic-ratelimit-output-tokens-limit", "anthropic-ratelimit-output-tokens-remaining", "anthropic-ratelimit-output-tokens-reset"},
}

func setInt(h *fasthttp.ResponseHeader, name string, v int64) {
	var buf [24]byte
	h.SetBytesV(name, strconv.AppendInt(buf[:0], v, 10))
}

// apply writes the family's headers. status is the response status: Azure
// adds retry-after-ms to its 429s.
func (s *rateSnap) apply(h *fasthttp.ResponseHeader, status int) {
	rc := s.conf
	switch rc.family {
	case FamilyOpenAI, FamilyGroq, FamilyAzure:
		setInt(h, "x-ratelimit-limit-requests", rc.limitReq)
		setInt(h, "x-ratelimit-limit-tokens", rc.limitTok)
		setInt(h, "x-ratelimit-remaining-requests", s.remReq)
		setInt(h, "x-ratelimit-remaining-tokens", s.remTok)
		if rc.family == FamilyAzure {
			// Azure sends integer seconds where OpenAI sends Go durations.
			secs := int64((s.reset + time.Second - 1) / time.Second)
			setInt(h, "x-ratelimit-reset-requests", secs)
			setInt(h, "x-ratelimit-reset-tokens", secs)
			if status == fasthttp.StatusTooManyRequests && len(h.Peek("retry-after-ms")) == 0 {
				setInt(h, "retry-after-ms", max(1, s.reset.Milliseconds()))
			}
		} else {
			d := s.reset.Round(time.Millisecond).String()
			h.Set("x-ratelimit-reset-requests", d)
			h.Set("x-ratelimit-reset-tokens", d)
		}
	case FamilyAnthropic:
		var buf [40]byte
		at := s.resetAt.UTC().Truncate(time.Second).AppendFormat(buf[:0], time.RFC3339)
		rem := [...]int64{s.remReq, s.remTok, s.remIn, s.remOu}
		lim := [...]int64{rc.limitReq, rc.limitTok, rc.limitTok, rc.limitTok}
		for i, names := range anthropicRateHeaders {
			setInt(h, names[0], lim[i])
			setInt(h, names[1], rem[i])
			h.SetBytesV(names[2], at)
		}
	case FamilyTogether:
		setInt(h, "x-ratelimit-limit", rc.limitReq)
		setInt(h, "x-ratelimit-remaining", s.remReq)
		setInt(h, "x-ratelimit-reset", int64((s.reset+time.Second-1)/time.Second))
		setInt(h, "x-tokenlimit-limit", rc.limitTok)
		setInt(h, "x-tokenlimit-remaining", s.remTok)
	case FamilyMistral:
		setInt(h, "x-ratelimit-limit-tokens-minute", rc.limitTok)
		setInt(h, "x-ratelimit-remaining-tokens-minute", s.remTok)
	}
}
