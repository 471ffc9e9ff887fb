package sqlite

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/store"
)

// BenchmarkInsertRequests is the request log writer's cost per record: a
// batch of 1024 in one transaction, as actors/requestlog writes them,
// from four tenants taking turns over two models.
func BenchmarkInsertRequests(b *testing.B) {
	d := open(b, filepath.Join(b.TempDir(), FileName))
	base := time.Now()
	recs := make([]store.Record, 1024)
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
}
