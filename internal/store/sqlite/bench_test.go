package sqlite

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/store"
)

// BenchmarkInsertRequests is the request log writer's cost per record
// and per commit: a full batch of 1024 in one transaction (a busy
// gateway's drain), 100 (a commit interval's worth at 1,000 requests a
// second) and 1 (an idle gateway's: the commit, its fsync under
// synchronous=FULL, is all the cost), from four tenants taking turns over
// two models.
func BenchmarkInsertRequests(b *testing.B) {
	for _, size := range []int{1024, 100, 1} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			d := open(b, filepath.Join(b.TempDir(), FileName))
			base := time.Now()
			recs := make([]store.Record, size)
			tenants, models := []string{"alice", "bob", "carol", "dave"}, []string{"gpt-4o", "claude-sonnet-4-5"}
			for i := range recs {
				recs[i] = rec(i, tenants[i%len(tenants)], models[i/3%len(models)], 200, base.Add(time.Duration(i)*time.Millisecond))
				recs[i].RequestID = fmt.Sprintf("req_3f9a1c2b7d_%08d", i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := d.InsertRequests(ctx, recs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/commit")
		})
	}
}
