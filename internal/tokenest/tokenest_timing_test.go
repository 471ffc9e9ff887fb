package tokenest

import (
	"fmt"
	"strings"
	"testing"
)

func BenchmarkEstimate(b *testing.B) {
	for _, n := range []int{2 << 10, 64 << 10} {
		msg := `{"role":"user","content":"` + strings.Repeat("Refactor the handler and keep the tests green. ", 20) + `"}`
		var parts []string
		for size := 0; size < n; size += len(msg) + 1 {
			parts = append(parts, msg)
		}
		body := []byte(`{"model":"m","stream":true,"messages":[` + strings.Join(parts, ",") + `],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`)
		b.Run(fmt.Sprintf("%dKiB", n>>10), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				Estimate(body, 32000)
			}
		})
	}
}
