package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/store"
)

// TestUsagePagesAndTotals: usage rows come in pages of at most Limit,
// ordered by bucket, tenant and model; After goes on exactly where the
// last page ended; the model filter is the database's; the total covers
// the whole window whatever the page.
func TestUsagePagesAndTotals(t *testing.T) {
	d := open(t, filepath.Join(t.TempDir(), FileName))
	var recs []store.Record
	for h := 0; h < 3; h++ {
		for _, tenant := range []string{"alice", "bob"} {
			for _, model := range []string{"m1", "m2", "m3"} {
				recs = append(recs, rec(len(recs), tenant, model, 200, base.Add(time.Duration(h)*time.Hour)))
			}
		}
	}
	if err := d.InsertRequests(ctx, recs); err != nil {
		t.Fatal(err)
	}
	for _, bucket := range []store.Bucket{store.Hour, store.Day} {
		q := store.UsageQuery{Bucket: bucket, Limit: 4}
		var all []store.UsageRow
		for pages := 0; ; pages++ {
			rows, err := d.Usage(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) > 4 || pages > 10 {
				t.Fatalf("%s: a page of %d rows", bucket, len(rows))
			}
			all = append(all, rows...)
			if len(rows) < 4 {
				break
			}
			k := rows[len(rows)-1].Key()
			q.After = &k
		}
		want := 18
		if bucket == store.Day {
			want = 6
		}
		if len(all) != want {
			t.Fatalf("%s: %d rows over the pages, want %d: %+v", bucket, len(all), want, all)
		}
		var n int64
		for i, r := range all {
			n += r.Requests
			if i > 0 {
				p := all[i-1]
				if !(p.Start.Before(r.Start) || p.Start.Equal(r.Start) && (p.TenantID < r.TenantID || p.TenantID == r.TenantID && p.Model < r.Model)) {
					t.Fatalf("%s: rows out of order or repeated at %d: %+v then %+v", bucket, i, p, r)
				}
			}
		}
		if n != 18 {
			t.Fatalf("%s: %d requests over the pages", bucket, n)
		}
	}
	rows, err := d.Usage(ctx, store.UsageQuery{Bucket: store.Day, Model: "m2"})
	if err != nil || len(rows) != 2 || rows[0].Model != "m2" || rows[0].Requests != 3 {
		t.Fatalf("model filter: %+v %v", rows, err)
	}
	tot, err := d.UsageTotal(ctx, store.UsageQuery{Tenant: "alice", Bucket: store.Hour, Since: base.Add(time.Hour), Limit: 1})
	if err != nil || tot.Requests != 6 || tot.CostNano != 6000 || tot.TokensIn != 600 {
		t.Fatalf("total: %+v %v", tot, err)
	}
}

// TestUsageOfAHugeTableIsBounded: a usage table of hugeRows rows (what a
// flood of unknown model names used to leave: 272,000 rows) is read a
// page at a time: a page holds at most its limit and is a range of the
// table's key, and the page and the window's total together allocate a
// few hundred kilobytes of Go memory however large the table (the old
// unpaged read took 500 MB for 272,000 rows; SQLite's own memory is its
// page cache, bounded by cache_size). Wall time is not asserted;
// BenchmarkUsageOfAHugeTable measures it.
func TestUsageOfAHugeTableIsBounded(t *testing.T) {
	d := hugeUsage(t, hugeRows)
	for _, bucket := range []store.Bucket{store.Hour, store.Day} {
		q := store.UsageQuery{Since: base.Add(-7 * 24 * time.Hour), Bucket: bucket, Limit: 500}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		rows, err := d.Usage(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		tot, err := d.UsageTotal(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		if len(rows) != 500 || tot.Requests != hugeRows {
			t.Fatalf("%s: %d rows, total %+v", bucket, len(rows), tot)
		}
		if alloc > 4<<20 {
			t.Fatalf("%s: a page of 500 usage rows of %d allocated %.1f MB", bucket, hugeRows, float64(alloc)/(1<<20))
		}
		t.Logf("%s: a page of 500 rows and the total over %d rows allocated %.2f MB", bucket, hugeRows, float64(alloc)/(1<<20))
	}
}

// hugeUsage is a database whose usage tables hold n rows, one per model
// name, in one hour of one day.
func hugeUsage(tb testing.TB, n int) *DB {
	d := open(tb, filepath.Join(tb.TempDir(), FileName))
	for _, table := range []string{"usage_hourly", "usage_daily"} {
		_, err := d.db.ExecContext(ctx, `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?)
			INSERT INTO `+table+` SELECT ?, 'key_flood', 'flood', 'no-such-model-' || x, 1, 1, 0, 0, 0, 0 FROM c`, n, base.Unix())
		if err != nil {
			tb.Fatal(err)
		}
	}
	return d
}

// BenchmarkUsageOfAHugeTable times a page of 500 rows and the window's
// total over hugeRows rows, per bucket.
func BenchmarkUsageOfAHugeTable(b *testing.B) {
	d := hugeUsage(b, hugeRows)
	for _, bucket := range []store.Bucket{store.Hour, store.Day} {
		q := store.UsageQuery{Since: base.Add(-7 * 24 * time.Hour), Bucket: bucket, Limit: 501}
		b.Run(string(bucket)+"/page", func(b *testing.B) {
			for b.Loop() {
				if rows, err := d.Usage(ctx, q); err != nil || len(rows) != 501 {
					b.Fatal(err)
				}
			}
		})
		b.Run(string(bucket)+"/total", func(b *testing.B) {
			for b.Loop() {
				if _, err := d.UsageTotal(ctx, q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestRequestsPageReadsABoundedPart: a filter that matches nothing reads
// at most MaxScanBatches batches per page and says where to go on; the
// pages together find the one match at the end of a long log.
func TestRequestsPageReadsABoundedPart(t *testing.T) {
	d := open(t, filepath.Join(t.TempDir(), FileName))
	if err := d.InsertRequests(ctx, []store.Record{rec(0, "rare", "m", 200, base)}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < MaxScanBatches+10; i++ { // one record per batch (one insert each)
		if err := d.InsertRequests(ctx, []store.Record{rec(i+1, "busy", "m", 200, base.Add(time.Second))}); err != nil {
			t.Fatal(err)
		}
	}
	f := store.Filter{Status: 500}
	p, err := d.Requests(ctx, f)
	if err != nil || len(p.Records) != 0 || p.Next == "" {
		t.Fatalf("first page of a filter that matches nothing: %d records, next %q, %v", len(p.Records), p.Next, err)
	}
	f.Cursor = p.Next
	if p, err = d.Requests(ctx, f); err != nil || len(p.Records) != 0 || p.Next != "" {
		t.Fatalf("second page: %d records, next %q, %v", len(p.Records), p.Next, err)
	}
	// The tenant filter skips the batches without the tenant: the rare
	// record is found on the first page.
	if p, err := d.Requests(ctx, store.Filter{Tenant: "rare"}); err != nil || len(p.Records) != 1 {
		t.Fatalf("rare tenant: %+v %v", p, err)
	}
	// A scan over every batch (status of the rare one) takes two pages.
	f = store.Filter{Model: "m", Limit: 1000}
	var got int
	for pages := 0; pages < 3; pages++ {
		p, err := d.Requests(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		got += len(p.Records)
		if p.Next == "" {
			break
		}
		f.Cursor = p.Next
	}
	if got != MaxScanBatches+11 {
		t.Fatalf("%d records over the pages, want %d", got, MaxScanBatches+11)
	}
}

// TestRefusalCounts: counts add up per hour, tenant and code; read back
// they are summed over the window, largest first, at most Limit.
func TestRefusalCounts(t *testing.T) {
	d := open(t, filepath.Join(t.TempDir(), FileName))
	add := func(at time.Time, tenant, code string, n int64) {
		t.Helper()
		if err := d.AddRefusals(ctx, []store.Refusal{{Start: at, TenantID: "key_" + tenant, TenantName: tenant, Code: code, Count: n}}); err != nil {
			t.Fatal(err)
		}
	}
	add(base, "a", "model_not_found", 10)
	add(base.Add(20*time.Minute), "a", "model_not_found", 5) // same hour
	add(base.Add(time.Hour), "a", "model_not_found", 1)
	add(base, "b", "invalid_json", 3)
	var rows int
	d.db.QueryRow("SELECT count(*) FROM refusals_hourly").Scan(&rows)
	if rows != 3 {
		t.Fatalf("%d rows for two hours of a's and one of b's", rows)
	}
	rs, err := d.Refusals(ctx, store.UsageQuery{})
	if err != nil || len(rs) != 2 || rs[0].Count != 16 || rs[0].TenantName != "a" || rs[1].Count != 3 || !rs[0].Start.Equal(base) {
		t.Fatalf("refusals %+v %v", rs, err)
	}
	if rs, _ := d.Refusals(ctx, store.UsageQuery{Since: base.Add(time.Hour)}); len(rs) != 1 || rs[0].Count != 1 {
		t.Fatalf("since the second hour: %+v", rs)
	}
	if rs, _ := d.Refusals(ctx, store.UsageQuery{Tenant: "b"}); len(rs) != 1 || rs[0].Code != "invalid_json" {
		t.Fatalf("tenant b: %+v", rs)
	}
	if rs, _ := d.Refusals(ctx, store.UsageQuery{Limit: 1}); len(rs) != 1 {
		t.Fatalf("limit 1: %+v", rs)
	}
	if _, err := d.DeleteBefore(ctx, base, base.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if rs, _ := d.Refusals(ctx, store.UsageQuery{}); len(rs) != 1 || rs[0].Count != 1 {
		t.Fatalf("after retention: %+v", rs)
	}
}

// TestDamagedPageStopsStartUp: one page of the request log overwritten
// in the middle of the file: the schema still reads, so only the check
// of every page at start-up finds it, and start-up stops saying so
// rather than a later query failing.
func TestDamagedPageStopsStartUp(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	d := open(t, path)
	for i := 0; i < 50; i++ {
		var recs []store.Record
		for j := 0; j < 100; j++ {
			recs = append(recs, rec(i*100+j, fmt.Sprintf("t%d", j%7), fmt.Sprintf("model-%d", j), 200, base))
		}
		if err := d.InsertRequests(ctx, recs); err != nil {
			t.Fatal(err)
		}
	}
	var pageSize, pages int
	d.db.QueryRow("PRAGMA page_size").Scan(&pageSize)
	d.db.QueryRow("PRAGMA page_count").Scan(&pages)
	d.Close()
	b, err := os.ReadFile(path)
	if err != nil || len(b) != pageSize*pages || pages < 20 {
		t.Fatalf("file of %d bytes, %d pages of %d: %v", len(b), pages, pageSize, err)
	}
	mid := pages / 2 * pageSize
	for i := mid; i < mid+pageSize; i++ {
		b[i] = 0xA5
	}
	os.WriteFile(path, b, 0o600)
	_, err = Open(path, Options{})
	var se *store.Error
	if err == nil || !errors.As(err, &se) || !strings.Contains(err.Error(), "is corrupt") || !strings.Contains(err.Error(), path) {
		t.Fatalf("a damaged page: %v", err)
	}
	if strings.Contains(se.Public, path) || strings.Contains(se.Public, filepath.Dir(path)) || !strings.Contains(se.Public, "corrupt") {
		t.Fatalf("the public message names the file: %q", se.Public)
	}
	if store.PublicMessage(err, "x") != se.Public {
		t.Fatal("PublicMessage does not use the public text")
	}
}

// TestFilesAreTheOwnersOnly: the database, its WAL and its shared-memory
// file are created 0600 whatever the umask allows, and an existing
// database readable by others is made the owner's only.
func TestFilesAreTheOwnersOnly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	d := open(t, path)
	if err := d.InsertRequests(ctx, []store.Record{rec(1, "a", "m", 200, base)}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", filepath.Base(p), fi.Mode(), err)
		}
	}
	d.Close()
	os.Chmod(path, 0o644)
	open(t, path).Close()
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("an existing 0644 database stays %v", fi.Mode())
	}
}

// TestDayBucketsCountWholeDays: day rows (their own table) equal the sums
// of their hours, and a since inside a day counts the whole day.
func TestDayBucketsCountWholeDays(t *testing.T) {
	d := open(t, filepath.Join(t.TempDir(), FileName))
	if err := d.InsertRequests(ctx, []store.Record{rec(1, "a", "m", 200, base), rec(2, "a", "m", 500, base.Add(5*time.Hour)), rec(3, "a", "m", 200, base.Add(20*time.Hour))}); err != nil {
		t.Fatal(err)
	}
	days, err := d.Usage(ctx, store.UsageQuery{Bucket: store.Day, Since: base.Add(3 * time.Hour)})
	if err != nil || len(days) != 2 || days[0].Requests != 2 || days[0].Errors != 1 || days[1].Requests != 1 ||
		!days[0].Start.Equal(time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("days %+v %v", days, err)
	}
	hours, _ := d.Usage(ctx, store.UsageQuery{Bucket: store.Hour, Since: base.Add(3 * time.Hour)})
	if len(hours) != 2 {
		t.Fatalf("hours since 13:00: %+v", hours)
	}
}

// TestMigrationFiveFillsTheDays: a version-4 file (hours only) gains
// usage_daily with the sums of its hours, and the refusal counts.
func TestMigrationFiveFillsTheDays(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	d := open(t, path)
	if err := d.InsertRequests(ctx, []store.Record{rec(1, "a", "m", 200, base), rec(2, "a", "m", 200, base.Add(time.Hour)), rec(3, "b", "m", 500, base)}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.db.ExecContext(ctx, `DROP TABLE usage_daily; DROP TABLE refusals_hourly; PRAGMA user_version = 4`); err != nil {
		t.Fatal(err)
	}
	d.Close()
	d = open(t, path)
	days, err := d.Usage(ctx, store.UsageQuery{Bucket: store.Day})
	if err != nil || len(days) != 2 || days[0].TenantID != "key_a" || days[0].Requests != 2 || days[1].Errors != 1 {
		t.Fatalf("days after migration 5: %+v %v", days, err)
	}
	if err := d.AddRefusals(ctx, []store.Refusal{{Start: base, TenantID: "key_a", Code: "x", Count: 1}}); err != nil {
		t.Fatal(err)
	}
}
