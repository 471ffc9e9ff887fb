package failure

import (
	"testing"
	"time"

	"github.com/omniroute/gateway/messages"
)

// TestAnalyzeTable covers the classification table with bodies as the
// providers send them.
func TestAnalyzeTable(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		class  messages.FailureClass
		reason string
		retry  time.Duration
	}{
		{"openai rate limit", 429, `{"error":{"message":"Rate limit reached for gpt-4o","type":"requests","code":"rate_limit_exceeded"}}`, messages.RateLimit, "rate_limit", 0},
		{"openai insufficient_quota", 429, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","code":"insufficient_quota"}}`, messages.Quota, "insufficient_quota", 0},
		{"anthropic rate limit", 429, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`, messages.RateLimit, "rate_limit", 0},
		{"mistral bare message", 429, `{"message":"Requests rate limit exceeded"}`, messages.RateLimit, "rate_limit", 0},
		{"together dynamic limit", 429, `{"error":{"message":"...","type":"dynamic_token_limited"}}`, messages.RateLimit, "dynamic_rate_limit", 0},
		{"gemini per minute", 429, `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[
 {"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerMinutePerProjectPerModel"}]},
 {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"34s"}]}}`, messages.RateLimit, "gemini_rate_limit", 34 * time.Second},
		{"gemini per day", 429, `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[
 {"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]},
 {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay": "1.5s"}]}}`, messages.Quota, "gemini_daily_quota", 1500 * time.Millisecond},
		{"openrouter in-flight budget is transient", 402, `{"error":{"code":402,"message":"...","metadata":{"reason":"in_flight_budget_exhausted","limit_source":"openrouter_in_flight_budget"}}}`, messages.RateLimit, "openrouter_in_flight_budget", 0},
		{"openrouter key limit", 402, `{"error":{"code":402,"message":"Key limit exceeded","metadata":{"limit_source":"openrouter_key_limit"}}}`, messages.Quota, "openrouter_key_limit", 0},
		{"openrouter credits", 402, `{"error":{"code":402,"message":"Insufficient credits","metadata":{"limit_source":"openrouter_credits"}}}`, messages.Quota, "openrouter_credits", 0},
		{"deepseek insufficient balance", 402, `{"error":{"message":"Insufficient Balance","type":"unknown_error","param":null,"code":"invalid_request_error"}}`, messages.Quota, "insufficient_balance", 0},
		{"anthropic low credit 400", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}`, messages.Quota, "anthropic_credit_balance", 0},
		{"context length is the request's fault", 400, `{"error":{"message":"This model's maximum context length is 128000 tokens","code":"context_length_exceeded"}}`, messages.Request, "context_length", 0},
		{"anthropic prompt too long", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}`, messages.Request, "context_length", 0},
		{"plain 400", 400, `{"error":{"message":"Unsupported parameter: 'foo'"}}`, messages.Request, "invalid_request", 0},
		{"404 model", 404, `{"error":{"code":"model_not_found"}}`, messages.Request, "not_found", 0},
		{"413", 413, ``, messages.Request, "request_too_large", 0},
		{"422", 422, `{"detail":"..."}`, messages.Request, "rejected", 0},
		{"401", 401, `{"error":{"code":"invalid_api_key"}}`, messages.Auth, "unauthorized", 0},
		{"403", 403, ``, messages.Auth, "forbidden", 0},
		{"408", 408, ``, messages.Timeout, "upstream_timeout", 0},
		{"504", 504, ``, messages.Timeout, "gateway_timeout", 0},
		{"anthropic 529", 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, messages.Capacity, "overloaded", 0},
		{"together 503", 503, `{"error":{"message":"The server is overloaded or not ready yet."}}`, messages.Capacity, "overloaded", 0},
		{"fireworks 503", 503, `{"error":{"object":"error","type":"internal_server_error","message":"service unavailable"}}`, messages.Capacity, "service_unavailable", 0},
		{"deepseek 503", 503, `{"error":{"message":"Server overloaded"}}`, messages.Capacity, "overloaded", 0},
		{"500", 500, ``, messages.Capacity, "server_error", 0},
		{"502", 502, `<html>bad gateway</html>`, messages.Capacity, "server_error", 0},
		{"200", 200, ``, messages.OK, "", 0},
	}
	for _, c := range cases {
		v := Analyze(c.status, []byte(c.body))
		if v.Class != c.class || v.Reason != c.reason || v.RetryAfter != c.retry {
			t.Errorf("%s: got %v/%q/%v, want %v/%q/%v", c.name, v.Class, v.Reason, v.RetryAfter, c.class, c.reason, c.retry)
		}
		// Only provider-side classes may cool a target.
		if (v.Class == messages.Request) == v.Class.ProviderSide() && v.Class != messages.OK {
			t.Errorf("%s: class %v provider-side = %v", c.name, v.Class, v.Class.ProviderSide())
		}
	}
}

func TestAnalyzeEvent(t *testing.T) {
	cases := []struct {
		data   string
		class  messages.FailureClass
		reason string
	}{
		{`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, messages.Capacity, "overloaded"},
		{`{"type":"error","code":"insufficient_quota","message":"You exceeded your current quota"}`, messages.Quota, "insufficient_quota"},
		{`{"error":{"message":"Rate limit exceeded","code":429},"choices":[{"finish_reason":"error"}]}`, messages.RateLimit, "rate_limit"},
		{`{"error":{"code":"context_length_exceeded"}}`, messages.Request, "context_length"},
		{`{"weird":true}`, messages.Capacity, "stream_error"},
	}
	for _, c := range cases {
		if v := AnalyzeEvent([]byte(c.data)); v.Class != c.class || v.Reason != c.reason {
			t.Errorf("%s: got %v/%q", c.data, v.Class, v.Reason)
		}
	}
}

func FuzzAnalyze(f *testing.F) {
	f.Add(429, `{"error":{"details":[{"retryDelay":"34s"}],"status":"RESOURCE_EXHAUSTED"}}`)
	f.Add(402, `{"error":{"metadata":{"limit_source":"openrouter_in_flight_budget"}}}`)
	f.Add(400, `credit balance`)
	f.Fuzz(func(t *testing.T, status int, body string) {
		v := Analyze(status, []byte(body))
		if v.Class >= messages.NumFailureClasses || v.RetryAfter < 0 {
			t.Fatalf("%d %q → %+v", status, body, v)
		}
		if status >= 200 && status < 300 && v.Class != messages.OK {
			t.Fatalf("2xx classified as %v", v.Class)
		}
		e := AnalyzeEvent([]byte(body))
		if e.Class == messages.OK || e.RetryAfter < 0 {
			t.Fatalf("event %q → %+v", body, e)
		}
	})
}
