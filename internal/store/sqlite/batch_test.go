package sqlite

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

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

// roundTrip encodes recs in format f, checks that both arrays are valid
// JSON, and decodes them.
func roundTrip(f batchFormat, recs []store.Record) ([]store.Record, []byte, error) {
	e := encoder{format: f}
	lo, _ := batchRange(recs)
	e.encode(recs, lo)
	if !json.Valid(e.records) || !json.Valid(e.strings) {
		return nil, e.records, fmt.Errorf("not valid JSON: strings %s", e.strings)
	}
	var d decoder
	got, err := d.decode(f, lo, e.strings, e.records, nil)
	return got, e.records, err
}

func TestColumnsRoundTripEveryField(t *testing.T) {
	if got, want := len(columns), reflect.TypeOf(store.Record{}).NumField(); got != want {
		t.Fatalf("%d columns for the %d fields of store.Record", got, want)
	}
	for _, f := range []batchFormat{formatInline, formatShared} {
		// full(1) twice: the second copy reads its texts from the batch's
		// strings as the first did.
		recs := []store.Record{full(1), full(2), full(1), {}}
		got, _, err := roundTrip(f, recs)
		if err != nil {
			t.Fatal(err)
		}
		recs[3].Time = time.UnixMilli(recs[3].Time.UnixMilli()).UTC() // the zero time is kept to the millisecond
		if !reflect.DeepEqual(got, recs) {
			t.Fatalf("format %d round trip:\n got %+v\nwant %+v", f, got, recs)
		}
	}
}

// TestSharedFormatWritesRepeatedTextsOnce: a batch of one tenant's
// traffic names the tenant, model and target once, in its strings.
func TestSharedFormatWritesRepeatedTextsOnce(t *testing.T) {
	recs := make([]store.Record, 100)
	for i := range recs {
		recs[i] = rec(i, "alice", "gpt-4o", 200, base.Add(time.Duration(i)*time.Millisecond))
	}
	e := encoder{format: formatShared}
	e.encode(recs, recs[0].Time.UnixMilli())
	for _, s := range []string{"alice", "key_alice", "gpt-4o", "p/c/gpt-4o", "openai", "loopback"} {
		if n := strings.Count(string(e.records), s); n != 0 {
			t.Errorf("records name %q %d times", s, n)
		}
		if n := strings.Count(string(e.strings), `"`+s+`"`); n != 1 {
			t.Errorf("strings name %q %d times: %s", s, n, e.strings)
		}
	}
	inline := encoder{format: formatInline}
	inline.encode(recs, 0)
	if len(e.records)+len(e.strings) > len(inline.records)*6/10 {
		t.Errorf("shared batch %d+%d bytes, inline %d: not 60 %% of it", len(e.records), len(e.strings), len(inline.records))
	}
}

func TestDecodeRefusesWhatItDidNotWrite(t *testing.T) {
	var d decoder
	zeros := `[[` + strings.Repeat("0,", len(columns)-1) + `0]]`
	for _, c := range []struct {
		f          batchFormat
		strs, recs string
	}{
		{formatInline, ``, ``}, {formatInline, ``, `{}`}, {formatInline, ``, `[1]`}, {formatInline, ``, `[[1]]`},
		{formatInline, ``, `[["x"]]`}, {formatInline, ``, `[[` + strings.Repeat("0,", len(columns)) + `0]]`}, {formatInline, ``, `[[0`},
		{formatInline, ``, zeros},   // texts are strings inline
		{formatShared, `[]`, zeros}, // index 0 of no strings
		{formatShared, `{}`, `[]`}, {formatShared, `[1]`, `[]`}, {formatShared, `["a"`, `[]`},
		{3, `[]`, `[]`},
	} {
		if _, err := d.decode(c.f, 0, []byte(c.strs), []byte(c.recs), nil); err == nil {
			t.Errorf("format %d strings %q records %q decoded", c.f, c.strs, c.recs)
		}
	}
	// A record of zeros but for its id, over one empty string.
	one := `[[0,""` + strings.Repeat(",0", len(columns)-2) + `]]`
	if got, err := d.decode(formatShared, 5, []byte(`[""]`), []byte(one), nil); err != nil || len(got) != 1 || got[0].Time.UnixMilli() != 5 {
		t.Errorf("a record of zeros over one empty string: %+v %v", got, err)
	}
}

// viewValue is what the requests view shows for col of r: the JSON value
// without quotes.
func viewValue(col *column, r *store.Record) string {
	if col.text != nil {
		return *col.text(r)
	}
	return strconv.FormatInt(col.num(r), 10)
}

// TestRequestsViewMatchesColumns: the requests view names every column in
// the order of the column table and reads back what was written, from
// batches of both formats.
func TestRequestsViewMatchesColumns(t *testing.T) {
	d := open(t, filepath.Join(t.TempDir(), FileName))
	// A formatInline batch, as migration 2 wrote them.
	old := full(4)
	e := encoder{format: formatInline}
	e.encode([]store.Record{old}, 0)
	ts := old.Time.UnixMilli()
	if _, err := d.db.Exec(`INSERT INTO request_batches(ts_min, ts_max, n, records) VALUES(?,?,1,?)`, ts, ts, string(e.records)); err != nil {
		t.Fatal(err)
	}
	r := full(3)
	if err := d.InsertRequests(ctx, []store.Record{full(2), r}); err != nil {
		t.Fatal(err)
	}
	oldRow := viewRow(t, d, `SELECT * FROM requests ORDER BY seq ASC LIMIT 1`)
	for i, col := range columns {
		if want := viewValue(&col, &old); oldRow[i+1] != want {
			t.Errorf("view of an inline batch: %s = %q, want %q", col.name, oldRow[i+1], want)
		}
	}
	vals := viewRow(t, d, `SELECT * FROM requests ORDER BY seq DESC LIMIT 1`)
	for i, col := range columns {
		if want := viewValue(&col, &r); vals[i+1] != want {
			t.Errorf("view %s = %q, want %q", col.name, vals[i+1], want)
		}
	}
	p, err := d.Requests(ctx, store.Filter{Limit: 1})
	if err != nil || len(p.Records) != 1 {
		t.Fatal(p, err)
	}
	// The view's seq of the newest record is the cursor a one-record page
	// gives for it: both are batch seq << positionBits | index.
	if vals[0] != p.Next {
		t.Fatalf("view seq %s, next cursor %q", vals[0], p.Next)
	}
}

// viewRow reads the one row of q over the requests view, checking its
// columns' names against the column table.
func viewRow(t *testing.T, d *DB, q string) []string {
	t.Helper()
	rows, err := d.db.Query(q)
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
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = string(v)
	}
	return out
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
		want := r
		want.RequestID, want.TenantName, want.Model = validUTF8(id), validUTF8(tenant), validUTF8(model)
		for _, f := range []batchFormat{formatInline, formatShared} {
			got, doc, err := roundTrip(f, []store.Record{r, r})
			if err != nil {
				t.Fatalf("format %d %s: %v", f, doc, err)
			}
			if len(got) != 2 || got[0] != want || got[1] != want {
				t.Fatalf("format %d round trip of %q:\n got %+v\nwant %+v", f, doc, got, want)
			}
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

// TestRecordsWrittenBeforeAColumnRead: a record written before an
// optional column existed (one field short) reads with the column zero;
// a record short of a required field is refused as before.
func TestRecordsWrittenBeforeAColumnRead(t *testing.T) {
	var d decoder
	optional := 0
	for _, c := range columns {
		if c.optional {
			optional++
		}
	}
	if optional == 0 || !columns[len(columns)-1].optional {
		t.Fatal("the optional columns come last")
	}
	old := `[[0,""` + strings.Repeat(",0", len(columns)-2-optional) + `]]`
	got, err := d.decode(formatShared, 5, []byte(`[""]`), []byte(old), nil)
	if err != nil || len(got) != 1 || got[0].Changes != "" || got[0].Time.UnixMilli() != 5 {
		t.Fatalf("a record from before the optional columns: %+v %v", got, err)
	}
	short := `[[0,""` + strings.Repeat(",0", len(columns)-3-optional) + `]]`
	if _, err := d.decode(formatShared, 5, []byte(`[""]`), []byte(short), nil); err == nil {
		t.Fatal("a record short of a required field decoded")
	}
}
