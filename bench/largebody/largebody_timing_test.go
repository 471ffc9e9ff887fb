package largebody

import (
	"context"
	"os"
	"testing"
	"time"
)

// BenchmarkFull is the full memory scenario: 200 concurrent 10 MiB uploads
// under GOMEMLIMIT=512MiB. It fails unless the gateway survives with peak
// RSS at most 768 MiB, answers only successes and admission rejections, and
// forwards every admitted body byte for byte. Run it with
//
//	go test ./bench/largebody -run '^$' -bench Full -benchtime 1x -v
func BenchmarkFull(b *testing.B) {
	for i := 0; i < b.N; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		r, err := Run(ctx, Options{Uploads: 200, Size: 10 << 20, GoMemLimit: "512MiB", Log: os.Stderr})
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("\n%s", r.Markdown())
		b.ReportMetric(float64(r.PeakRSS)/(1<<20), "peak-rss-MiB")
		b.ReportMetric(float64(r.Forwarded), "forwarded")
		b.ReportMetric(float64(r.MaxRejectLatency.Milliseconds()), "max-reject-ms")
		if err := r.Check(768 << 20); err != nil {
			b.Fatal(err)
		}
	}
}
