package fit

import (
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/dialect"
	"github.com/omniroute/gateway/internal/jsonscan"
)

// agentTurn is an agent's chat turn of about 24 KB: a long conversation
// and a few top-level fields.
func agentTurn(maxTokens string) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"gpt-4o","messages":[{"role":"system","content":"` + strings.Repeat("You are a careful coding agent. ", 100) + `"}`)
	for i := 0; i < 60; i++ {
		b.WriteString(`,{"role":"user","content":"` + strings.Repeat("please change the function ", 12) + `"},{"role":"assistant","content":"done"}`)
	}
	b.WriteString(`],"max_tokens":` + maxTokens + `,"temperature":0.2,"stream":true,"reasoning_effort":"high"}`)
	return []byte(b.String())
}

func benchFit(b *testing.B, body []byte) {
	var r jsonscan.Request
	if err := jsonscan.ScanRequest(body, &r); err != nil {
		b.Fatal(err)
	}
	in := info("gpt-4o")
	o := &Options{}
	var f Fitter
	dst := make([]byte, 0, len(body)+64)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dst, _, _ = f.Fit(dst[:0], body, r.Members, dialect.Chat, in, o)
	}
}

// BenchmarkFitRewrites: the limit clamped and reasoning_effort dropped
// from a 24 KB agent turn (the body is copied once).
func BenchmarkFitRewrites(b *testing.B) { benchFit(b, agentTurn("128000")) }

// BenchmarkFitNothingToDrop: the same turn without reasoning_effort and
// within the limit: the members are looked at, nothing is copied.
func BenchmarkFitNothingToDrop(b *testing.B) {
	body := agentTurn("1000")
	body = []byte(strings.Replace(string(body), `,"reasoning_effort":"high"`, "", 1))
	benchFit(b, body)
}
