package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/jsonscan"
	"github.com/omniroute/gateway/internal/store"
)

// The request log is stored one row per batch: a JSON array of records,
// each a positional array in the order of columns. A row per record cost
// the writer 7-12 µs a record (20 bound values, three B-tree inserts, the
// driver's per-value work), a fifth of the gateway's CPU at full load;
// a row per batch costs it well under a microsecond a record. The
// requests view turns the batches back into one row per record for
// anyone reading the file with SQL, and Requests filters in Go, skipping
// batches by their time range and by request_batch_keys (the tenants and
// models each batch holds).

// maxBatchRecords bounds the records of one row; a record's position
// (the view's seq, the paging cursor) is its batch's seq << positionBits
// | its index.
const (
	maxBatchRecords = 1024
	positionBits    = 12
)

// column is one field of a record: its name in the requests view, how it
// is written into the record's array and read back.
type column struct {
	name string
	put  func(b []byte, r *store.Record) []byte
	get  func(c *jsonscan.Cursor, r *store.Record) bool
}

// columns is the single list of a record's fields, in array order. The
// requests view of migration 2 names them in this order; a test checks
// that the view and this list agree and that every field of store.Record
// round-trips.
var columns = []column{
	{"ts", func(b []byte, r *store.Record) []byte { return strconv.AppendInt(b, r.Time.UnixMilli(), 10) },
		func(c *jsonscan.Cursor, r *store.Record) bool {
			n, ok := c.Int()
			r.Time = time.UnixMilli(n).UTC()
			return ok
		}},
	text("request_id", func(r *store.Record) *string { return &r.RequestID }),
	text("tenant_id", func(r *store.Record) *string { return &r.TenantID }),
	text("tenant_name", func(r *store.Record) *string { return &r.TenantName }),
	text("model", func(r *store.Record) *string { return &r.Model }),
	text("target", func(r *store.Record) *string { return &r.Target }),
	text("caller_dialect", func(r *store.Record) *string { return &r.CallerDialect }),
	text("upstream_dialect", func(r *store.Record) *string { return &r.UpstreamDialect }),
	integer("status", func(r *store.Record) *int { return &r.Status }),
	text("error_code", func(r *store.Record) *string { return &r.ErrorCode }),
	integer("attempts", func(r *store.Record) *int { return &r.Attempts }),
	integer("fallbacks", func(r *store.Record) *int { return &r.Fallbacks }),
	micros("admission_wait_us", func(r *store.Record) *time.Duration { return &r.AdmissionWait }),
	micros("ttft_us", func(r *store.Record) *time.Duration { return &r.TTFT }),
	micros("latency_us", func(r *store.Record) *time.Duration { return &r.Latency }),
	integer("tokens_in", func(r *store.Record) *int64 { return &r.TokensIn }),
	integer("tokens_out", func(r *store.Record) *int64 { return &r.TokensOut }),
	integer("tokens_cached", func(r *store.Record) *int64 { return &r.TokensCached }),
	integer("cost_nano", func(r *store.Record) *int64 { return &r.CostNano }),
	text("client_ip", func(r *store.Record) *string { return (*string)(&r.ClientIP) }),
}

func text(name string, f func(*store.Record) *string) column {
	return column{name, func(b []byte, r *store.Record) []byte { return appendText(b, *f(r)) },
		func(c *jsonscan.Cursor, r *store.Record) bool {
			t, ok := c.Text()
			*f(r) = string(t)
			return ok
		}}
}

// plain marks the bytes a JSON string may hold as they are: printable
// ASCII but for the quote and the backslash.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendText appends s as a JSON string. The names, ids and classes of a
// record are almost always plain ASCII, copied in one append; anything
// else takes the escaping writer (encoding the JSON was half the log's
// cost with it alone).
func appendText(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if !plain[s[i]] {
			return apierror.AppendString(b, s)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func integer[T ~int | ~int64](name string, f func(*store.Record) *T) column {
	return column{name, func(b []byte, r *store.Record) []byte { return strconv.AppendInt(b, int64(*f(r)), 10) },
		func(c *jsonscan.Cursor, r *store.Record) bool {
			n, ok := c.Int()
			*f(r) = T(n)
			return ok
		}}
}

func micros(name string, f func(*store.Record) *time.Duration) column {
	return column{name, func(b []byte, r *store.Record) []byte { return strconv.AppendInt(b, f(r).Microseconds(), 10) },
		func(c *jsonscan.Cursor, r *store.Record) bool {
			n, ok := c.Int()
			*f(r) = time.Duration(n) * time.Microsecond
			return ok
		}}
}

// appendRecords appends recs as one batch's JSON array.
func appendRecords(b []byte, recs []store.Record) []byte {
	b = append(b, '[')
	for i := range recs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		for j := range columns {
			if j > 0 {
				b = append(b, ',')
			}
			b = columns[j].put(b, &recs[i])
		}
		b = append(b, ']')
	}
	return append(b, ']')
}

// decodeRecords reads a batch written by appendRecords.
func decodeRecords(c *jsonscan.Cursor, doc []byte, out []store.Record) ([]store.Record, error) {
	c.Reset(doc)
	if !c.Array() {
		return out, fmt.Errorf("a request log batch is not a JSON array")
	}
	for c.Next() {
		if !c.Array() {
			return out, fmt.Errorf("record %d of a request log batch is not an array", len(out))
		}
		var r store.Record
		for j := range columns {
			if !c.Next() || !columns[j].get(c, &r) {
				return out, fmt.Errorf("record %d of a request log batch: field %s is missing or of the wrong type", len(out), columns[j].name)
			}
		}
		if c.Next() {
			return out, fmt.Errorf("record %d of a request log batch has more than %d fields", len(out), len(columns))
		}
		out = append(out, r)
	}
	if err := c.Err(); err != nil {
		return out, fmt.Errorf("a request log batch is not valid JSON: %w", err)
	}
	return out, nil
}

// Batch key kinds: request_batch_keys says which tenants (by id and by
// name) and models a batch holds, so a filtered listing reads only those.
const (
	keyTenant = "t"
	keyModel  = "m"
)

const (
	insertBatch = `INSERT INTO request_batches(ts_min, ts_max, n, records) VALUES(?,?,?,?)`
	insertKey   = `INSERT OR IGNORE INTO request_batch_keys(kind, value, seq) VALUES(?,?,?)`
)

// batchStmts are the two statements of writeBatch, bound to a transaction.
type batchStmts struct{ batch, key *sql.Stmt }

// batchStmts returns the database's prepared statements bound to tx.
func (d *DB) batchStmts(ctx context.Context, tx *sql.Tx) (batchStmts, error) {
	ins, err := d.prepared(ctx, tx, &d.insBatch, insertBatch)
	if err != nil {
		return batchStmts{}, err
	}
	key, err := d.prepared(ctx, tx, &d.insKey, insertKey)
	return batchStmts{ins, key}, err
}

// writeBatch inserts recs (at most maxBatchRecords) as one row and its keys.
func writeBatch(ctx context.Context, st batchStmts, recs []store.Record, buf []byte) ([]byte, error) {
	lo, hi := batchRange(recs)
	buf = appendRecords(buf[:0], recs)
	// As a string, not []byte: SQLite would take a blob for JSONB, and
	// the view's json_each reads text.
	res, err := st.batch.ExecContext(ctx, lo, hi, len(recs), string(buf))
	if err != nil {
		return buf, err
	}
	seq, err := res.LastInsertId()
	if err != nil {
		return buf, err
	}
	seen := map[[2]string]bool{}
	for i := range recs {
		r := &recs[i]
		for _, k := range [...][2]string{{keyTenant, r.TenantID}, {keyTenant, r.TenantName}, {keyModel, r.Model}} {
			if k[1] == "" || seen[k] {
				continue
			}
			seen[k] = true
			if _, err := st.key.ExecContext(ctx, k[0], k[1], seq); err != nil {
				return buf, err
			}
		}
	}
	return buf, nil
}

// batchRange is the range of recs' times in milliseconds (0, 0 for none).
func batchRange(recs []store.Record) (lo, hi int64) {
	for i := range recs {
		ts := recs[i].Time.UnixMilli()
		if i == 0 {
			lo, hi = ts, ts
		}
		lo, hi = min(lo, ts), max(hi, ts)
	}
	return lo, hi
}

// insertBatches writes recs in rows of at most maxBatchRecords.
func insertBatches(ctx context.Context, st batchStmts, recs []store.Record) error {
	// Sized for a typical record (about 200 bytes), so a batch rarely
	// grows the buffer while it is written.
	buf := make([]byte, 0, min(len(recs), maxBatchRecords)*256)
	for start := 0; start < len(recs); start += maxBatchRecords {
		var err error
		if buf, err = writeBatch(ctx, st, recs[start:min(start+maxBatchRecords, len(recs))], buf); err != nil {
			return err
		}
	}
	return nil
}

// migrateToBatches is migration 2: the rows of the old one-row-per-record
// table move into batches in their order, and a view of the old name
// shows them as before.
func migrateToBatches(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, `CREATE TABLE request_batches (
		seq    INTEGER PRIMARY KEY AUTOINCREMENT,
		ts_min INTEGER NOT NULL,
		ts_max INTEGER NOT NULL,
		n      INTEGER NOT NULL,
		records TEXT NOT NULL
	);
	CREATE INDEX request_batches_ts_min ON request_batches(ts_min);
	CREATE INDEX request_batches_ts_max ON request_batches(ts_max);
	CREATE TABLE request_batch_keys (
		kind  TEXT NOT NULL,
		value TEXT NOT NULL,
		seq   INTEGER NOT NULL,
		PRIMARY KEY (kind, value, seq)
	) WITHOUT ROWID;
	CREATE INDEX request_batch_keys_seq ON request_batch_keys(seq);`); err != nil {
		return err
	}
	names := make([]string, len(columns))
	for i, c := range columns {
		names[i] = c.name
	}
	sel := "SELECT seq, " + strings.Join(names, ", ") + " FROM requests WHERE seq > ? ORDER BY seq LIMIT ?"
	// Prepared on the migrating transaction: the new tables are not
	// visible to the database's other connections until it commits.
	var st batchStmts
	var err error
	if st.batch, err = tx.PrepareContext(ctx, insertBatch); err != nil {
		return err
	}
	defer st.batch.Close()
	if st.key, err = tx.PrepareContext(ctx, insertKey); err != nil {
		return err
	}
	defer st.key.Close()
	var after int64
	for {
		recs, last, err := oldRows(ctx, tx, sel, after)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			break
		}
		if err := insertBatches(ctx, st, recs); err != nil {
			return err
		}
		after = last
	}
	_, err = tx.ExecContext(ctx, `DROP TABLE requests;
	CREATE VIEW requests AS SELECT (b.seq << 12) | j.key AS seq,
		j.value ->> 0 AS ts, j.value ->> 1 AS request_id, j.value ->> 2 AS tenant_id, j.value ->> 3 AS tenant_name,
		j.value ->> 4 AS model, j.value ->> 5 AS target, j.value ->> 6 AS caller_dialect, j.value ->> 7 AS upstream_dialect,
		j.value ->> 8 AS status, j.value ->> 9 AS error_code, j.value ->> 10 AS attempts, j.value ->> 11 AS fallbacks,
		j.value ->> 12 AS admission_wait_us, j.value ->> 13 AS ttft_us, j.value ->> 14 AS latency_us,
		j.value ->> 15 AS tokens_in, j.value ->> 16 AS tokens_out, j.value ->> 17 AS tokens_cached,
		j.value ->> 18 AS cost_nano, j.value ->> 19 AS client_ip
	FROM request_batches b, json_each(b.records) j;`)
	return err
}

// oldRows reads up to maxBatchRecords rows of the old requests table
// after seq after.
func oldRows(ctx context.Context, tx *sql.Tx, sel string, after int64) ([]store.Record, int64, error) {
	rows, err := tx.QueryContext(ctx, sel, after, maxBatchRecords)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var recs []store.Record
	last := after
	for rows.Next() {
		var r store.Record
		var ts, wait, ttft, lat int64
		var ip string
		if err := rows.Scan(&last, &ts, &r.RequestID, &r.TenantID, &r.TenantName, &r.Model, &r.Target, &r.CallerDialect, &r.UpstreamDialect,
			&r.Status, &r.ErrorCode, &r.Attempts, &r.Fallbacks, &wait, &ttft, &lat, &r.TokensIn, &r.TokensOut, &r.TokensCached, &r.CostNano, &ip); err != nil {
			return nil, 0, err
		}
		r.Time = time.UnixMilli(ts).UTC()
		r.AdmissionWait, r.TTFT, r.Latency = time.Duration(wait)*time.Microsecond, time.Duration(ttft)*time.Microsecond, time.Duration(lat)*time.Microsecond
		r.ClientIP = store.IPClass(ip)
		recs = append(recs, r)
	}
	return recs, last, rows.Err()
}
