package sqlite

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/store"
)

// full is a record whose every field holds a value of its own, so a field
// that the column table forgets, or two columns that share a field, fail
// the round trip.
func full(i int) store.Record {
	var r store.Record
	v := reflect.ValueOf(&r).Elem()
	for f := 0; f < v.NumField(); f++ {
		n := int64(1000*i + f + 1)
		switch fv := v.Field(f); fv.Interface().(type) {
		case time.Time:
			fv.Set(reflect.ValueOf(time.UnixMilli(1_700_000_000_000 + n).UTC()))
		case time.Duration:
			fv.SetInt(n * int64(time.Microsecond))
		default:
			switch fv.Kind() {
			case reflect.String:
				fv.SetString(fmt.Sprintf("%s \"%d\" ü\\", v.Type().Field(f).Name, n))
			case reflect.Int, reflect.Int64:
				fv.SetInt(n)
			default:
				panic("full: add a case for field " + v.Type().Field(f).Name)
			}
		}
	}
	return r
}

func TestColumnsRoundTripEveryField(t *testing.T) {
	if got, want := len(columns), reflect.TypeOf(store.Record{}).NumField(); got != want {
		t.Fatalf("%d columns for the %d fields of store.Record", got, want)
	}
	recs := []store.Record{full(1), full(2), {}}
	var c jsonscan.Cursor
	got, err := decodeRecords(&c, appendRecords(nil, recs), nil)
	if err != nil {
		t.Fatal(err)
	}
	recs[2].Time = time.UnixMilli(recs[2].Time.UnixMilli()).UTC() // the zero time is kept to the millisecond
	if !reflect.DeepEqual(got, recs) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, recs)
	}
}

func TestDecodeRecordsRefusesWhatItDidNotWrite(t *testing.T) {
	var c jsonscan.Cursor
	for _, doc := range []string{``, `{}`, `[1]`, `[[1]]`, `[["x"]]`, `[[` + strings.Repeat("0,", len(columns)) + `0]]`, `[[0`} {
		if _, err := decodeRecords(&c, []byte(doc), nil); err == nil {
			t.Errorf("%q decoded", doc)
		}
	}
}

// TestRequestsViewMatchesColumns: the view of migration 2 names every
// column in the order of the column table and reads back what was written.
func TestRequestsViewMatchesColumns(t *testing.T) {
	d := open(t, filepath.Join(t.TempDir(), FileName))
	r := full(3)
	if err := d.InsertRequests(ctx, []store.Record{full(2), r}); err != nil {
		t.Fatal(err)
	}
	rows, err := d.db.Query(`SELECT * FROM requests ORDER BY seq DESC LIMIT 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	names, _ := rows.Columns()
	if len(names) != len(columns)+1 || names[0] != "seq" {
		t.Fatalf("view columns %v", names)
	}
	vals := make([]sql.RawBytes, len(names))
	ptrs := make([]any, len(names))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if !rows.Next() {
		t.Fatal("the view has no rows")
	}
	if err := rows.Scan(ptrs...); err != nil {
		t.Fatal(err)
	}
	for i, col := range columns {
		if names[i+1] != col.name {
			t.Errorf("view column %d is %s, the table's is %s", i+1, names[i+1], col.name)
		}
		// What the view reads is the JSON value without quotes.
		want := string(col.put(nil, &r))
		if s, err := strconv.Unquote(want); err == nil {
			want = s
		}
		if string(vals[i+1]) != want {
			t.Errorf("view %s = %q, want %q", col.name, vals[i+1], want)
		}
	}
	p, err := d.Requests(ctx, store.Filter{Limit: 1})
	if err != nil || len(p.Records) != 1 {
		t.Fatal(p, err)
	}
	// The view's seq of the newest record is the cursor a one-record page
	// gives for it: both are batch seq << positionBits | index.
	if string(vals[0]) != p.Next {
		t.Fatalf("view seq %s, next cursor %q", vals[0], p.Next)
	}
}

// TestMigrationMovesTheOldTable: a database of schema 1 keeps every
// record, in order, through migration 2.
func TestMigrationMovesTheOldTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(migrations[0].sql + `; PRAGMA user_version = 1`); err != nil {
		t.Fatal(err)
	}
	const n = 2500 // three batches
	tx, err := raw.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		r := rec(i, fmt.Sprintf("t%d", i%3), "m", 200+i%2*300, base.Add(time.Duration(i)*time.Second))
		if _, err := tx.Exec(`INSERT INTO requests(ts, request_id, tenant_id, tenant_name, model, target, caller_dialect, upstream_dialect,
			status, error_code, attempts, fallbacks, admission_wait_us, ttft_us, latency_us, tokens_in, tokens_out, tokens_cached, cost_nano, client_ip)
			VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`, r.Time.UnixMilli(), r.RequestID, r.TenantID, r.TenantName, r.Model, r.Target,
			r.CallerDialect, r.UpstreamDialect, r.Status, r.ErrorCode, r.Attempts, r.Fallbacks, r.AdmissionWait.Microseconds(),
			r.TTFT.Microseconds(), r.Latency.Microseconds(), r.TokensIn, r.TokensOut, r.TokensCached, r.CostNano, string(r.ClientIP)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	d := open(t, path)
	var version, batches int
	if err := d.db.QueryRow("PRAGMA user_version").Scan(&version); err != nil || version != SchemaVersion() {
		t.Fatalf("version %d %v", version, err)
	}
	if err := d.db.QueryRow("SELECT count(*) FROM request_batches").Scan(&batches); err != nil || batches != 3 {
		t.Fatalf("%d batches %v", batches, err)
	}
	var all []store.Record
	f := store.Filter{Limit: MaxPage}
	for {
		p, err := d.Requests(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, p.Records...)
		if p.Next == "" {
			break
		}
		f.Cursor = p.Next
	}
	if len(all) != n {
		t.Fatalf("%d records after the migration, want %d", len(all), n)
	}
	for i, r := range all {
		if want := rec(n-1-i, fmt.Sprintf("t%d", (n-1-i)%3), "m", 200+(n-1-i)%2*300, base.Add(time.Duration(n-1-i)*time.Second)); r != want {
			t.Fatalf("record %d:\n got %+v\nwant %+v", i, r, want)
		}
	}
	p, err := d.Requests(ctx, store.Filter{Tenant: "t1", Status: 5, Limit: MaxPage})
	want := 0
	for i := 0; i < n; i++ {
		if i%3 == 1 && i%2 == 1 {
			want++
		}
	}
	if err != nil || len(p.Records) != want {
		t.Fatalf("t1 5xx: %d records %v", len(p.Records), err)
	}
}

// FuzzBatchRoundTrip: any text in a record's fields comes back as it went
// in (invalid UTF-8 as U+FFFD, the rule of the JSON writer), and the batch
// is valid JSON.
func FuzzBatchRoundTrip(f *testing.F) {
	f.Add("req_1", "alice", "gpt-4o", int64(200), int64(-5))
	f.Add("\"\\\n\x00", "\u2028<>&", "ü", int64(0), int64(1<<62))
	f.Fuzz(func(t *testing.T, id, tenant, model string, status, tokens int64) {
		r := store.Record{Time: time.UnixMilli(1_700_000_000_000).UTC(), RequestID: id, TenantName: tenant, Model: model,
			Status: int(status), TokensIn: tokens}
		doc := appendRecords(nil, []store.Record{r, r})
		var c jsonscan.Cursor
		got, err := decodeRecords(&c, doc, nil)
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		r.RequestID, r.TenantName, r.Model = validUTF8(id), validUTF8(tenant), validUTF8(model)
		if len(got) != 2 || got[0] != r || got[1] != r {
			t.Fatalf("round trip of %q:\n got %+v\nwant %+v", doc, got, r)
		}
	})
}

// validUTF8 replaces each byte of s that is not UTF-8 with U+FFFD, as the
// JSON writer does.
func validUTF8(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
