//go:build !race

package quota

import (
	"testing"

	"github.com/omniroute/gateway/messages"
)

// TestHeaderParseAllocAllocatesNothing: parsing a response's rate-limit
// headers is on every attempt; it must not allocate.
func TestHeaderParseAllocAllocatesNothing(t *testing.T) {
	m, _ := Family("openai")
	names := [][]byte{[]byte("Content-Type"), []byte("X-Ratelimit-Limit-Requests"), []byte("X-Ratelimit-Remaining-Requests"), []byte("X-Ratelimit-Reset-Requests"),
		[]byte("X-Ratelimit-Limit-Tokens"), []byte("X-Ratelimit-Remaining-Tokens"), []byte("X-Ratelimit-Reset-Tokens"), []byte("Retry-After-Ms")}
	values := [][]byte{[]byte("application/json"), []byte("5000"), []byte("4999"), []byte("12ms"), []byte("160000"), []byte("159976"), []byte("6m0s"), []byte("250")}
	var obs messages.QuotaObservation
	var b Builder
	run := func() {
		b.Reset(m, t0)
		for i := range names {
			b.Header(names[i], values[i])
		}
		b.Finish(&obs)
	}
	run()
	if obs.N != 2 || !obs.HasRetryAfter {
		t.Fatalf("parsed %+v", obs)
	}
	if a := testing.AllocsPerRun(200, run); a != 0 {
		t.Fatalf("header parsing allocated %.1f times; want 0", a)
	}
	am, _ := Family("anthropic")
	run2 := func() {
		b.Reset(am, t0)
		b.Header([]byte("anthropic-ratelimit-tokens-remaining"), []byte("1000"))
		b.Header([]byte("anthropic-ratelimit-tokens-reset"), []byte("2025-08-21T12:40:59Z"))
		b.Finish(&obs)
	}
	if a := testing.AllocsPerRun(200, run2); a != 0 {
		t.Fatalf("RFC 3339 reset allocated %.1f times; want 0", a)
	}
}
