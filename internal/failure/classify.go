// Package failure classifies upstream failures by what they mean for the
// target: a transient rate limit, exhausted quota or billing, provider
// capacity, a timeout, a refused credential, or a problem with the request
// itself. Only provider-side classes may move a target's state or trigger
// failover; a request the provider rejected would be rejected everywhere.
//
// Classification reads the status and a bounded prefix of the error body,
// because the status alone lies in both directions: OpenAI sends billing
// exhaustion as 429 insufficient_quota, OpenRouter sends a transient
// in-flight budget as 402, Anthropic has reported a spent credit balance as
// 400, and Gemini's 429 is a per-minute blip or a per-day wall depending on
// the quota id in its details.
package failure

import (
	"bytes"
	"time"

	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/messages"
)

// Verdict is the classification of one failure.
type Verdict struct {
	Class messages.FailureClass
	// Reason is a stable machine-readable cause, e.g. "insufficient_quota",
	// "openrouter_in_flight_budget", "gemini_daily_quota".
	Reason string
	// RetryAfter is a retry hint found in the body (Gemini's RetryInfo
	// retryDelay); 0 when none.
	RetryAfter time.Duration
}

// Classify maps an upstream HTTP status and (bounded) error body to a class.
func Classify(status int, body []byte) messages.FailureClass {
	return Analyze(status, body).Class
}

// byStatus is the verdict of each status whose body is not read.
var byStatus = map[int]Verdict{
	401: {Class: messages.Auth, Reason: "unauthorized"},
	403: {Class: messages.Auth, Reason: "forbidden"},
	408: {Class: messages.Timeout, Reason: "upstream_timeout"},
	504: {Class: messages.Timeout, Reason: "gateway_timeout"},
	529: {Class: messages.Capacity, Reason: "overloaded"},
	404: {Class: messages.Request, Reason: "not_found"},
	413: {Class: messages.Request, Reason: "request_too_large"},
}

// Analyze classifies an upstream answer by status and error body.
func Analyze(status int, body []byte) Verdict {
	if status >= 200 && status < 300 {
		return Verdict{Class: messages.OK}
	}
	if v, ok := byStatus[status]; ok {
		return v
	}
	lower := lowerPrefix(body, 4096)
	switch {
	case status == 429:
		return analyze429(lower)
	case status == 402:
		return analyze402(lower)
	case status == 503:
		if containsAny(lower, "overloaded", "capacity", "too many requests") {
			return Verdict{Class: messages.Capacity, Reason: "overloaded"}
		}
		return Verdict{Class: messages.Capacity, Reason: "service_unavailable"}
	case status >= 500:
		return Verdict{Class: messages.Capacity, Reason: "server_error"}
	case status == 400:
		return analyze400(lower)
	}
	return Verdict{Class: messages.Request, Reason: "rejected"}
}

// billingPhrases mark quota or billing exhaustion (needs money or a human).
var billingPhrases = []string{"insufficient_quota", "exceeded your current quota", "insufficient balance", "insufficient_balance",
	"credit balance", "credits exhausted", "out of credits", "billing", "payment required", "balance is $0"}

func analyze429(lower []byte) Verdict {
	switch {
	case containsAny(lower, "insufficient_quota", "exceeded your current quota"):
		return Verdict{Class: messages.Quota, Reason: "insufficient_quota"}
	case containsAny(lower, billingPhrases...):
		return Verdict{Class: messages.Quota, Reason: "billing"}
	case bytes.Contains(lower, []byte("resource_exhausted")) || bytes.Contains(lower, []byte("quotafailure")):
		v := Verdict{Class: messages.RateLimit, Reason: ReasonGeminiRateLimit, RetryAfter: retryDelay(lower)}
		if containsAny(lower, "perday", "per_day", "per day") {
			v.Class, v.Reason = messages.Quota, "gemini_daily_quota"
		}
		return v
	case containsAny(lower, "dynamic_request_limited", "dynamic_token_limited"):
		return Verdict{Class: messages.RateLimit, Reason: ReasonDynamicRateLimit}
	}
	return Verdict{Class: messages.RateLimit, Reason: ReasonRateLimit}
}

func analyze402(lower []byte) Verdict {
	switch {
	case bytes.Contains(lower, []byte("openrouter_in_flight_budget")):
		// Transient although a 402: OpenRouter holds concurrent spend and
		// releases it as requests finish (it sends Retry-After).
		return Verdict{Class: messages.RateLimit, Reason: ReasonInFlightBudget}
	case bytes.Contains(lower, []byte("openrouter_key_limit")):
		return Verdict{Class: messages.Quota, Reason: "openrouter_key_limit"}
	case bytes.Contains(lower, []byte("openrouter_credits")):
		return Verdict{Class: messages.Quota, Reason: "openrouter_credits"}
	case containsAny(lower, "insufficient balance", "insufficient_balance"):
		return Verdict{Class: messages.Quota, Reason: "insufficient_balance"}
	}
	return Verdict{Class: messages.Quota, Reason: "payment_required"}
}

func analyze400(lower []byte) Verdict {
	switch {
	case containsAny(lower, "credit balance is too low", "credit balance"):
		return Verdict{Class: messages.Quota, Reason: "anthropic_credit_balance"}
	case containsAny(lower, "insufficient balance", "insufficient_balance", "billing"):
		return Verdict{Class: messages.Quota, Reason: "billing"}
	case containsAny(lower, "context_length", "context length", "prompt is too long", "maximum context", "too many tokens"):
		return Verdict{Class: messages.Request, Reason: "context_length"}
	}
	return Verdict{Class: messages.Request, Reason: "invalid_request"}
}

// retryDelay finds Gemini's RetryInfo "retryDelay":"34s" in a lower-cased
// body.
func retryDelay(lower []byte) time.Duration {
	key := []byte(`"retrydelay"`)
	i := bytes.Index(lower, key)
	if i < 0 {
		return 0
	}
	rest := bytes.TrimLeft(lower[i+len(key):], " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' {
		return 0
	}
	rest = bytes.TrimLeft(rest[1:], " \t\r\n")
	if len(rest) == 0 || rest[0] != '"' {
		return 0
	}
	rest = rest[1:]
	j := bytes.IndexByte(rest, '"')
	if j < 0 || j > 32 {
		return 0
	}
	d, ok := quota.ParseGoDuration(rest[:j])
	if !ok {
		return 0
	}
	return d
}

// ClassifyEvent classifies an in-stream error event (before the first
// content byte reached the caller) by its payload.
func ClassifyEvent(data []byte) messages.FailureClass {
	return AnalyzeEvent(data).Class
}

// AnalyzeEvent classifies an in-stream error event by its payload. An event
// without a recognisable cause counts as capacity: the provider failed.
func AnalyzeEvent(data []byte) Verdict {
	lower := lowerPrefix(data, 4096)
	switch {
	case containsAny(lower, "insufficient_quota", "exceeded your current quota"):
		return Verdict{Class: messages.Quota, Reason: "insufficient_quota"}
	case containsAny(lower, "credit balance", "billing", "insufficient balance"):
		return Verdict{Class: messages.Quota, Reason: "billing"}
	case containsAny(lower, "rate_limit", "rate limit", "too many requests", "resource_exhausted"):
		return Verdict{Class: messages.RateLimit, Reason: ReasonRateLimit, RetryAfter: retryDelay(lower)}
	case containsAny(lower, "overloaded"):
		return Verdict{Class: messages.Capacity, Reason: "overloaded"}
	case containsAny(lower, "capacity", "unavailable", "server_error", "api_error", "internal"):
		return Verdict{Class: messages.Capacity, Reason: "server_error"}
	case containsAny(lower, "context_length", "context length", "prompt is too long"):
		return Verdict{Class: messages.Request, Reason: "context_length"}
	case containsAny(lower, "invalid_request"):
		return Verdict{Class: messages.Request, Reason: "invalid_request"}
	}
	return Verdict{Class: messages.Capacity, Reason: "stream_error"}
}

func lowerPrefix(b []byte, n int) []byte {
	if len(b) > n {
		b = b[:n]
	}
	return bytes.ToLower(b)
}

func containsAny(b []byte, subs ...string) bool {
	for _, s := range subs {
		if bytes.Contains(b, []byte(s)) {
			return true
		}
	}
	return false
}

// The reasons of the rate_limit class: a provider refusing for its rate
// limits, as opposed to failing. A cooldown with one of them is a real
// provider rate limit, answered 429 when every target is out; other
// cooldowns are outages, answered 503 (transport).
const (
	ReasonRateLimit        = "rate_limit"
	ReasonGeminiRateLimit  = "gemini_rate_limit"
	ReasonDynamicRateLimit = "dynamic_rate_limit"
	ReasonInFlightBudget   = "openrouter_in_flight_budget"
)

// RateLimitReasons lists them.
var RateLimitReasons = []string{ReasonRateLimit, ReasonGeminiRateLimit, ReasonDynamicRateLimit, ReasonInFlightBudget}

// IsRateLimit reports whether reason (a Verdict's, or a cooldown's) is a
// provider's rate limit.
func IsRateLimit(reason string) bool {
	for _, r := range RateLimitReasons {
		if r == reason {
			return true
		}
	}
	return false
}
