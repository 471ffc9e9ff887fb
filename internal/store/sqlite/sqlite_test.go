package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/store"
	"github.com/omniroute/gateway/internal/tenantpolicy"
)

var ctx = context.Background()

func open(t testing.TB, path string) *DB {
	t.Helper()
	d, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestOpenMigratesOnceInWALMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", FileName)
	d := open(t, path)
	var mode string
	var version int
	if err := d.db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal mode %q %v", mode, err)
	}
	if err := d.db.QueryRow("PRAGMA user_version").Scan(&version); err != nil || version != SchemaVersion() {
		t.Fatalf("version %d %v", version, err)
	}
	var timeout int
	if err := d.db.QueryRow("PRAGMA busy_timeout").Scan(&timeout); err != nil || timeout != 5000 {
		t.Fatalf("busy timeout %d %v", timeout, err)
	}
	d.Close()
	// Opening again applies nothing and keeps the data.
	d2 := open(t, path)
	if err := d2.CreateKey(ctx, store.Key{Name: "a", TenantID: "key_a", KeyHash: "h", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	d2.Close()
	d3 := open(t, path)
	if ks, err := d3.Keys(ctx); err != nil || len(ks) != 1 {
		t.Fatalf("keys after reopening: %v %v", ks, err)
	}
}

func TestKeys(t *testing.T) {
	d := open(t, filepath.Join(t.TempDir(), FileName))
	at := time.Date(2026, 3, 14, 10, 0, 0, 0, time.UTC)
	pol := tenantpolicy.Policy{RequestsPerMinute: 60, AllowedModels: []string{"claude-*"}, DailyBudgetUSD: 2.5}
	if err := d.CreateKey(ctx, store.Key{Name: "ci", TenantID: "key_1", KeyHash: "aa", Policy: pol, CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	if err := d.CreateKey(ctx, store.Key{Name: "ci", TenantID: "key_2", KeyHash: "bb", CreatedAt: at}); !errors.Is(err, store.ErrDuplicateName) {
		t.Fatalf("duplicate name: %v", err)
	}
	if err := d.CreateKey(ctx, store.Key{Name: "other", TenantID: "key_3", KeyHash: "aa", CreatedAt: at}); err == nil || errors.Is(err, store.ErrDuplicateName) {
		t.Fatalf("duplicate hash: %v", err)
	}
	pol.MaxConcurrent = 4
	if err := d.UpdatePolicy(ctx, "ci", pol); err != nil {
		t.Fatal(err)
	}
	if err := d.RotateKey(ctx, "ci", "cc", at.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	ks, err := d.Keys(ctx)
	if err != nil || len(ks) != 1 {
		t.Fatal(ks, err)
	}
	k := ks[0]
	if k.KeyHash != "cc" || k.TenantID != "key_1" || k.Policy.MaxConcurrent != 4 || k.Policy.AllowedModels[0] != "claude-*" ||
		!k.CreatedAt.Equal(at) || !k.RotatedAt.Equal(at.Add(time.Hour)) || k.Revoked() {
		t.Fatalf("%+v", k)
	}
	if err := d.RevokeKey(ctx, "ci", at.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{d.RevokeKey(ctx, "ci", at), d.RotateKey(ctx, "ci", "dd", at), d.UpdatePolicy(ctx, "ci", pol)} {
		if !errors.Is(err, store.ErrRevoked) {
			t.Fatalf("change of a revoked key: %v", err)
		}
	}
	if err := d.RotateKey(ctx, "nope", "ee", at); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown key: %v", err)
	}
	if ks, _ := d.Keys(ctx); !ks[0].Revoked() || !ks[0].RevokedAt.Equal(at.Add(2*time.Hour)) {
		t.Fatalf("%+v", ks[0])
	}
	// The revoked key keeps its name.
	if err := d.CreateKey(ctx, store.Key{Name: "ci", TenantID: "key_9", KeyHash: "ff", CreatedAt: at}); !errors.Is(err, store.ErrDuplicateName) {
		t.Fatalf("name of a revoked key reused: %v", err)
	}
}

var base = time.Date(2026, 3, 14, 10, 0, 0, 0, time.UTC)

func rec(i int, tenant, model string, status int, at time.Time) store.Record {
	return store.Record{Time: at, RequestID: fmt.Sprintf("req_%d", i), TenantID: "key_" + tenant, TenantName: tenant, Model: model,
		Target: "p/c/" + model, CallerDialect: "openai", UpstreamDialect: "openai", Status: status, Attempts: 1,
		AdmissionWait: 3 * time.Millisecond, TTFT: 120 * time.Millisecond, Latency: time.Second,
		TokensIn: 100, TokensOut: 10, TokensCached: 40, CostNano: 1000, ClientIP: store.IPLoopback}
}

func TestRequestLog(t *testing.T) {
	d := open(t, filepath.Join(t.TempDir(), FileName))
	var recs []store.Record
	for i := 0; i < 30; i++ {
		tenant, model, status := "alice", "gpt-4o", 200
		if i%3 == 0 {
			tenant = "bob"
		}
		if i%5 == 0 {
			model, status = "claude", 429
		}
		recs = append(recs, rec(i, tenant, model, status, base.Add(time.Duration(i)*10*time.Minute)))
	}
	recs[7].ErrorCode, recs[7].Status, recs[7].Fallbacks = "upstream_timeout", 504, 2
	if err := d.InsertRequests(ctx, recs[:20]); err != nil {
		t.Fatal(err)
	}
	if err := d.InsertRequests(ctx, recs[20:]); err != nil {
		t.Fatal(err)
	}
	all, err := d.Requests(ctx, store.Filter{Limit: 1000})
	if err != nil || len(all.Records) != 30 || all.Next != "" {
		t.Fatalf("all: %d %q %v", len(all.Records), all.Next, err)
	}
	got := all.Records[len(all.Records)-1-7] // newest first
	want := recs[7]
	if got != want {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
	}
	count := func(f store.Filter) int {
		p, err := d.Requests(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		return len(p.Records)
	}
	for _, c := range []struct {
		f    store.Filter
		want int
	}{
		{store.Filter{Tenant: "bob"}, 10},
		{store.Filter{Tenant: "key_bob"}, 10},
		{store.Filter{Model: "claude"}, 6},
		{store.Filter{Status: 429}, 6},
		{store.Filter{Status: 5}, 1},
		{store.Filter{Status: 2}, 23},
		{store.Filter{Since: base.Add(100 * time.Minute)}, 20},
		{store.Filter{Since: base.Add(100 * time.Minute), Until: base.Add(200 * time.Minute)}, 10},
		{store.Filter{Since: base.Add(1000 * time.Hour)}, 0},
		{store.Filter{Until: base}, 0},
		{store.Filter{Tenant: "alice", Model: "gpt-4o", Status: 200}, 15},
	} {
		if n := count(c.f); n != c.want {
			t.Errorf("%+v: %d records, want %d", c.f, n, c.want)
		}
	}
	if _, err := d.Requests(ctx, store.Filter{Cursor: "bogus"}); err == nil {
		t.Fatal("bogus cursor accepted")
	}
}

// TestPagingIsStableUnderInserts: records inserted between pages never
// make a page repeat or skip one.
func TestPagingIsStableUnderInserts(t *testing.T) {
	d := open(t, filepath.Join(t.TempDir(), FileName))
	var first []store.Record
	for i := 0; i < 25; i++ {
		first = append(first, rec(i, "alice", "m", 200, base.Add(time.Duration(i)*time.Second)))
	}
	if err := d.InsertRequests(ctx, first); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	f := store.Filter{Limit: 10, Tenant: "alice"}
	for page := 0; ; page++ {
		p, err := d.Requests(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Records {
			if seen[r.RequestID] {
				t.Fatalf("page %d repeats %s", page, r.RequestID)
			}
			seen[r.RequestID] = true
		}
		// New requests arrive while the caller pages.
		if err := d.InsertRequests(ctx, []store.Record{rec(100+page, "alice", "m", 200, base.Add(time.Hour))}); err != nil {
			t.Fatal(err)
		}
		if p.Next == "" {
			break
		}
		f.Cursor = p.Next
	}
	for _, r := range first {
		if !seen[r.RequestID] {
			t.Fatalf("%s was skipped", r.RequestID)
		}
	}
	if len(seen) != 25 {
		t.Fatalf("saw %d records, want the 25 that existed at the start", len(seen))
	}
}

func TestUsageSpendAndRetention(t *testing.T) {
	d := open(t, filepath.Join(t.TempDir(), FileName))
	day2 := base.Add(24 * time.Hour)
	recs := []store.Record{
		rec(1, "alice", "gpt-4o", 200, base),
		rec(2, "alice", "gpt-4o", 500, base.Add(30*time.Minute)),
		rec(3, "alice", "gpt-4o", 200, base.Add(90*time.Minute)),
		rec(4, "alice", "claude", 200, base),
		rec(5, "bob", "gpt-4o", 200, base),
		rec(6, "alice", "gpt-4o", 200, day2),
	}
	recs[5].CostNano = 5000
	if err := d.InsertRequests(ctx, recs); err != nil {
		t.Fatal(err)
	}
	rows, err := d.Usage(ctx, store.UsageQuery{Tenant: "alice", Bucket: store.Day})
	if err != nil {
		t.Fatal(err)
	}
	type k struct {
		day   time.Time
		model string
	}
	got := map[k]store.UsageRow{}
	for _, r := range rows {
		got[k{r.Start, r.Model}] = r
	}
	d1 := time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC)
	if r := got[k{d1, "gpt-4o"}]; len(rows) != 3 || r.Requests != 3 || r.Errors != 1 || r.TokensIn != 300 || r.TokensOut != 30 || r.TokensCached != 120 || r.CostNano != 3000 || r.TenantName != "alice" {
		t.Fatalf("day rows %+v", rows)
	}
	hours, err := d.Usage(ctx, store.UsageQuery{Tenant: "key_alice", Bucket: store.Hour, Since: base, Until: base.Add(2 * time.Hour)})
	if err != nil || len(hours) != 3 { // 10:00 gpt-4o (2), 10:00 claude, 11:00 gpt-4o
		t.Fatalf("hour rows %+v %v", hours, err)
	}
	if _, err := d.Usage(ctx, store.UsageQuery{Bucket: "week"}); err == nil {
		t.Fatal("unknown bucket accepted")
	}
	spend, err := d.Spend(ctx, d1)
	if err != nil || spend["key_alice"] != 9000 || spend["key_bob"] != 1000 {
		t.Fatalf("spend %v %v", spend, err)
	}
	if spend, _ := d.Spend(ctx, day2); spend["key_alice"] != 5000 || len(spend) != 1 {
		t.Fatalf("spend since day 2: %v", spend)
	}
	n, err := d.DeleteBefore(ctx, day2, d1)
	if err != nil || n != 5 {
		t.Fatalf("deleted %d %v", n, err)
	}
	if p, _ := d.Requests(ctx, store.Filter{}); len(p.Records) != 1 {
		t.Fatalf("%d records left", len(p.Records))
	}
	// Usage is kept longer than the log: it was not older than d1.
	if spend, _ := d.Spend(ctx, d1); spend["key_alice"] != 9000 {
		t.Fatalf("usage went with the log: %v", spend)
	}
}

func TestCorruptDatabaseStopsStartUp(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	os.WriteFile(garbage, []byte(strings.Repeat("this is not a database ", 400)), 0o600)
	// A real database whose pages after the header were overwritten.
	damaged := filepath.Join(dir, "damaged.db")
	d := open(t, damaged)
	d.InsertRequests(ctx, []store.Record{rec(1, "a", "m", 200, base)})
	d.Close()
	os.Remove(damaged + "-wal")
	os.Remove(damaged + "-shm")
	b, _ := os.ReadFile(damaged)
	for i := 100; i < len(b); i++ {
		b[i] = 0xA5
	}
	os.WriteFile(damaged, b, 0o600)
	for _, p := range []string{garbage, damaged} {
		_, err := Open(p, Options{})
		if err == nil || !strings.Contains(err.Error(), "is corrupt or not a SQLite database") || !strings.Contains(err.Error(), "move it away") {
			t.Errorf("%s: %v", filepath.Base(p), err)
		}
	}
}

func TestLockedDatabaseStopsStartUp(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	open(t, path).Close()
	// Another process (here: another connection) holds the write lock.
	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(ctx, "ROLLBACK")
	_, err = Open(path, Options{BusyTimeout: 50 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "is locked by another process") {
		t.Fatalf("locked database: %v", err)
	}
}

func TestNewerSchemaStopsStartUp(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	d := open(t, path)
	d.db.Exec("PRAGMA user_version = 99")
	d.Close()
	if _, err := Open(path, Options{}); err == nil || !strings.Contains(err.Error(), "newer than this gateway's") {
		t.Fatalf("newer schema: %v", err)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "a?b.db"), Options{}); err == nil {
		t.Fatal("path with ? accepted")
	}
}

func TestFullDatabase(t *testing.T) {
	d, err := Open(filepath.Join(t.TempDir(), FileName), Options{MaxPages: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var recs []store.Record
	for i := 0; i < 2000; i++ {
		recs = append(recs, rec(i, "alice", "m", 200, base))
	}
	err = d.InsertRequests(ctx, recs)
	if !IsFull(err) || !strings.Contains(err.Error(), "full") {
		t.Fatalf("insert into a full database: %v", err)
	}
}
