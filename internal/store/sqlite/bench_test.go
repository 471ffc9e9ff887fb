package sqlite

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/store"
)

// BenchmarkInsertRequests is the request log writer's cost per record: a
// batch of 256 in one transaction, as actors/requestlog writes them.
func BenchmarkInsertRequests(b *testing.B) {
	d := open(b, filepath.Join(b.TempDir(), FileName))
	base := time.Now()
	recs := make([]store.Record, 1024)
	for i := range recs {
		recs[i] = rec(i, "alice", "gpt-4o", 200, base)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := d.InsertRequests(ctx, recs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
}
