// Package failure classifies upstream failures by what they mean for the
// target: a transient rate limit, exhausted quota or billing, provider
// capacity, a timeout, a refused credential, or a problem with the request
// itself. Only provider-side classes may move a target's state or trigger
// failover; a request the provider rejected would be rejected everywhere.
package failure

import (
	"bytes"

	"github.com/omniroute/gateway/messages"
)

// Classify maps an upstream HTTP status and (bounded) error body to a class.
func Classify(status int, body []byte) messages.FailureClass {
	lower := lowerPrefix(body, 4096)
	switch {
	case status >= 200 && status < 300:
		return messages.OK
	case status == 429:
		if containsAny(lower, "insufficient_quota", "quota exceeded", "exceeded your current quota", "credits", "billing") {
			return messages.Quota
		}
		return messages.RateLimit
	case status == 402:
		return messages.Quota
	case status == 401 || status == 403:
		return messages.Auth
	case status == 408 || status == 504:
		return messages.Timeout
	case status == 529 || status >= 500:
		return messages.Capacity
	case status == 400 && containsAny(lower, "credit balance is too low", "insufficient balance", "billing"):
		return messages.Quota
	}
	return messages.Request
}

// ClassifyEvent classifies an in-stream error event (before the first
// content byte reached the caller) by its payload.
func ClassifyEvent(data []byte) messages.FailureClass {
	lower := lowerPrefix(data, 4096)
	switch {
	case containsAny(lower, "insufficient_quota", "credit balance", "billing"):
		return messages.Quota
	case containsAny(lower, "rate_limit", "rate limit", "too many requests"):
		return messages.RateLimit
	case containsAny(lower, "overloaded", "capacity", "unavailable", "server_error", "api_error", "internal"):
		return messages.Capacity
	case containsAny(lower, "invalid_request", "context_length", "context length"):
		return messages.Request
	}
	return messages.Capacity
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
