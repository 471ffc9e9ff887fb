package quota

import (
	"testing"

	"github.com/omniroute/gateway/messages"
)

// BenchmarkHeaderParse parses a realistic OpenAI response header set.
func BenchmarkHeaderParse(b *testing.B) {
	m, _ := Family("openai")
	names := [][]byte{[]byte("Date"), []byte("Content-Type"), []byte("Openai-Processing-Ms"), []byte("X-Request-Id"), []byte("X-Ratelimit-Limit-Requests"), []byte("X-Ratelimit-Remaining-Requests"),
		[]byte("X-Ratelimit-Reset-Requests"), []byte("X-Ratelimit-Limit-Tokens"), []byte("X-Ratelimit-Remaining-Tokens"), []byte("X-Ratelimit-Reset-Tokens"), []byte("Strict-Transport-Security")}
	values := [][]byte{[]byte("Mon, 01 Jun 2026 12:00:00 GMT"), []byte("application/json"), []byte("312"), []byte("req_abc"), []byte("5000"), []byte("4999"), []byte("12ms"),
		[]byte("160000"), []byte("159976"), []byte("6m0s"), []byte("max-age=31536000")}
	var obs messages.QuotaObservation
	var bl Builder
	b.ReportAllocs()
	for b.Loop() {
		bl.Reset(m, t0)
		for i := range names {
			bl.Header(names[i], values[i])
		}
		bl.Finish(&obs)
	}
}
