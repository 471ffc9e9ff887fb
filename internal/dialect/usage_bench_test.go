package dialect

import (
	"bytes"
	"testing"
)

// BenchmarkBodyUsage is the metering of one non-streaming answer, as the
// gateway reads every answer when the request log or a limit is on (it
// was internal/ledger's BenchmarkParseUsage when ledger had its own
// parser).
func BenchmarkBodyUsage(b *testing.B) {
	body := []byte(`{"id":"chatcmpl-mock-1","object":"chat.completion","created":1700000000,"model":"mock-demo","choices":[{"index":0,"message":{"role":"assistant","content":"mock reply mock reply mock reply mock reply mock reply mock reply mock reply mock reply"},"finish_reason":"stop"}],"usage":{"prompt_tokens":21,"completion_tokens":16,"total_tokens":37}}`)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var u Usage
		if !Of(Chat).BodyUsage(body, &u) || u.Output != 16 {
			b.Fatal(u)
		}
	}
}

// FuzzLastUsageKey: the backward scan finds what bytes.LastIndex finds.
func FuzzLastUsageKey(f *testing.F) {
	for _, s := range []string{``, `"usage"`, `x"usage"y"usage"`, `"usag`, `usage"`, `""usage"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := lastUsageKey(data), bytes.LastIndex(data, []byte(`"usage"`)); got != want {
			t.Fatalf("lastUsageKey(%q) = %d, bytes.LastIndex = %d", data, got, want)
		}
	})
}
