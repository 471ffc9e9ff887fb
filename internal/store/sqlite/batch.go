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

// batchFormat is how a batch's records are written. Migration 2 wrote
// formatInline: every field in the record, the time in Unix
// milliseconds. Since migration 3 batches are formatShared: a record's
// time is milliseconds after the batch's ts_min, and its repeated texts
// (tenant, model, target, dialects, error code, address class) are
// indexes into the batch's strings array. A batch of one tenant's traffic
// then writes about half the bytes, and the writer's cost is mostly the
// bytes it writes (encoding them, then the WAL and its checkpoint).
type batchFormat int

const (
	formatInline batchFormat = 1
	formatShared batchFormat = 2
)

// colKind is how a column is stored.
type colKind uint8

const (
	kindTime   colKind = iota // Unix ms (inline), ms after ts_min (shared)
	kindText                  // a JSON string in every format
	kindShared                // a JSON string (inline), an index into strings (shared)
	kindInt                   // an integer
	kindMicros                // a duration in whole microseconds
)

// Key bits: request_batch_keys says which tenants (by id and by name)
// and models a batch holds, so a filtered listing reads only those.
const (
	keyTenantBit uint8 = 1 << iota
	keyModelBit
)

// column is one field of a record: its name in the requests view, how it
// is stored, and which request_batch_keys kind its values are.
type column struct {
	name string
	kind colKind
	key  uint8
	// optional: records written before the column existed end without
	// it; it reads as zero for them.
	optional bool
	text     func(*store.Record) *string // text kinds
	num      func(*store.Record) int64   // numeric kinds
	set      func(*store.Record, int64)  // numeric kinds
}

// columns is the single list of a record's fields, in array order. The
// requests view is generated from it; a test checks that the view and
// this list agree and that every field of store.Record round-trips.
var columns = []column{
	{name: "ts", kind: kindTime, num: func(r *store.Record) int64 { return r.Time.UnixMilli() },
		set: func(r *store.Record, n int64) { r.Time = time.UnixMilli(n).UTC() }},
	text("request_id", kindText, 0, func(r *store.Record) *string { return &r.RequestID }),
	text("tenant_id", kindShared, keyTenantBit, func(r *store.Record) *string { return &r.TenantID }),
	text("tenant_name", kindShared, keyTenantBit, func(r *store.Record) *string { return &r.TenantName }),
	text("model", kindShared, keyModelBit, func(r *store.Record) *string { return &r.Model }),
	text("target", kindShared, 0, func(r *store.Record) *string { return &r.Target }),
	text("caller_dialect", kindShared, 0, func(r *store.Record) *string { return &r.CallerDialect }),
	text("upstream_dialect", kindShared, 0, func(r *store.Record) *string { return &r.UpstreamDialect }),
	integer("status", func(r *store.Record) *int { return &r.Status }),
	text("error_code", kindShared, 0, func(r *store.Record) *string { return &r.ErrorCode }),
	integer("attempts", func(r *store.Record) *int { return &r.Attempts }),
	integer("fallbacks", func(r *store.Record) *int { return &r.Fallbacks }),
	micros("admission_wait_us", func(r *store.Record) *time.Duration { return &r.AdmissionWait }),
	micros("ttft_us", func(r *store.Record) *time.Duration { return &r.TTFT }),
	micros("latency_us", func(r *store.Record) *time.Duration { return &r.Latency }),
	integer("tokens_in", func(r *store.Record) *int64 { return &r.TokensIn }),
	integer("tokens_out", func(r *store.Record) *int64 { return &r.TokensOut }),
	integer("tokens_cached", func(r *store.Record) *int64 { return &r.TokensCached }),
	integer("cost_nano", func(r *store.Record) *int64 { return &r.CostNano }),
	text("client_ip", kindShared, 0, func(r *store.Record) *string { return (*string)(&r.ClientIP) }),
	// Since migration 4.
	optionalColumn(text("changes", kindShared, 0, func(r *store.Record) *string { return &r.Changes })),
}

func optionalColumn(c column) column {
	c.optional = true
	return c
}

func text(name string, kind colKind, key uint8, f func(*store.Record) *string) column {
	return column{name: name, kind: kind, key: key, text: f}
}

func integer[T ~int | ~int64](name string, f func(*store.Record) *T) column {
	return column{name: name, kind: kindInt, num: func(r *store.Record) int64 { return int64(*f(r)) },
		set: func(r *store.Record, n int64) { *f(r) = T(n) }}
}

func micros(name string, f func(*store.Record) *time.Duration) column {
	return column{name: name, kind: kindMicros, num: func(r *store.Record) int64 { return f(r).Microseconds() },
		set: func(r *store.Record, n int64) { *f(r) = time.Duration(n) * time.Microsecond }}
}

// requestsView is the requests view over the batches of both formats, one
// row per record, generated from the column table.
func requestsView() string {
	var b strings.Builder
	b.WriteString("CREATE VIEW requests AS SELECT (b.seq << 12) | j.key AS seq")
	for i, col := range columns {
		v := fmt.Sprintf("(j.value ->> %d)", i)
		switch col.kind {
		case kindTime:
			v = fmt.Sprintf("CASE b.format WHEN %d THEN %s ELSE b.ts_min + %s END", formatInline, v, v)
		case kindShared:
			// An integer right operand of ->> is an array index.
			v = fmt.Sprintf("CASE b.format WHEN %d THEN %s ELSE b.strings ->> %s END", formatInline, v, v)
		}
		fmt.Fprintf(&b, ",\n\t\t%s AS %s", v, col.name)
	}
	b.WriteString("\n\tFROM request_batches b, json_each(b.records) j;")
	return b.String()
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

// encoder writes batches. It is reused from batch to batch (its buffers
// and its string index), so one writer owns one.
type encoder struct {
	format batchFormat
	strs   []string       // the batch's strings, by index
	bits   []uint8        // key bits of each string
	index  map[string]int // string -> index in strs
	// recent is each column's last few texts and their indexes: records
	// mostly repeat those of the few tenants and models of the moment,
	// and comparing a few strings is cheaper than hashing one.
	recent  [][recentTexts]recentText
	records []byte // the records array
	strings []byte // the strings array (formatShared)
}

// recentTexts is how many texts a column remembers.
const recentTexts = 4

type recentText struct {
	s  string
	i  int
	ok bool
}

// intern returns s's index in the batch's strings, adding it if new, and
// marks it with the column's key bits.
func (e *encoder) intern(j int, s string, key uint8) int {
	rc := &e.recent[j]
	for k := range rc {
		if rc[k].ok && rc[k].s == s {
			return rc[k].i
		}
	}
	i, ok := e.index[s]
	if !ok {
		i = len(e.strs)
		e.strs, e.bits = append(e.strs, s), append(e.bits, 0)
		e.index[s] = i
	}
	e.bits[i] |= key
	copy(rc[1:], rc[:recentTexts-1])
	rc[0] = recentText{s, i, true}
	return i
}

// appendInt appends n in decimal; most of a record's numbers (counts,
// zero durations, statuses below 100 never, but attempts and fallbacks
// always) are one digit, which skips strconv's call.
func appendInt(b []byte, n int64) []byte {
	if 0 <= n && n < 10 {
		return append(b, byte('0'+n))
	}
	return strconv.AppendInt(b, n, 10)
}

// encode writes recs as one batch: e.records, e.strings (empty for
// formatInline) and e.strs with the key bits of each.
func (e *encoder) encode(recs []store.Record, base int64) {
	if e.index == nil {
		e.index = map[string]int{}
		e.recent = make([][recentTexts]recentText, len(columns))
	}
	clear(e.index)
	clear(e.recent)
	e.strs, e.bits = e.strs[:0], e.bits[:0]
	b := append(e.records[:0], '[')
	for i := range recs {
		r := &recs[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		for j := range columns {
			col := &columns[j]
			if j > 0 {
				b = append(b, ',')
			}
			switch col.kind {
			case kindText:
				b = appendText(b, *col.text(r))
			case kindShared:
				s := *col.text(r)
				k := e.intern(j, s, col.key)
				if e.format == formatInline {
					b = appendText(b, s)
				} else {
					b = appendInt(b, int64(k))
				}
			case kindTime:
				n := col.num(r)
				if e.format != formatInline {
					n -= base
				}
				b = appendInt(b, n)
			default:
				b = appendInt(b, col.num(r))
			}
		}
		b = append(b, ']')
	}
	e.records = append(b, ']')
	s := append(e.strings[:0], '[')
	if e.format != formatInline {
		for i, t := range e.strs {
			if i > 0 {
				s = append(s, ',')
			}
			s = appendText(s, t)
		}
	}
	e.strings = append(s, ']')
}

// decoder reads batches of either format.
type decoder struct {
	c    jsonscan.Cursor
	strs []string
}

// decode appends the records of one batch to out.
func (d *decoder) decode(format batchFormat, base int64, strs, doc []byte, out []store.Record) ([]store.Record, error) {
	c := &d.c
	d.strs = d.strs[:0]
	switch format {
	case formatInline:
	case formatShared:
		c.Reset(strs)
		if !c.Array() {
			return out, fmt.Errorf("the strings of a request log batch are not a JSON array")
		}
		for c.Next() {
			t, ok := c.Text()
			if !ok {
				return out, fmt.Errorf("string %d of a request log batch is not a JSON string", len(d.strs))
			}
			d.strs = append(d.strs, string(t))
		}
		if err := c.Err(); err != nil {
			return out, fmt.Errorf("the strings of a request log batch are not valid JSON: %w", err)
		}
	default:
		return out, fmt.Errorf("a request log batch has format %d, which this gateway does not know", format)
	}
	c.Reset(doc)
	if !c.Array() {
		return out, fmt.Errorf("a request log batch is not a JSON array")
	}
	for c.Next() {
		if !c.Array() {
			return out, fmt.Errorf("record %d of a request log batch is not an array", len(out))
		}
		var r store.Record
		ended := false
		for j := range columns {
			if !ended && !c.Next() {
				ended = true
			}
			if ended && columns[j].optional {
				continue
			}
			if ended || !d.field(format, base, &columns[j], &r) {
				return out, fmt.Errorf("record %d of a request log batch: field %s is missing or of the wrong type", len(out), columns[j].name)
			}
		}
		if !ended && c.Next() {
			return out, fmt.Errorf("record %d of a request log batch has more than %d fields", len(out), len(columns))
		}
		out = append(out, r)
	}
	if err := c.Err(); err != nil {
		return out, fmt.Errorf("a request log batch is not valid JSON: %w", err)
	}
	return out, nil
}

// field reads the cursor's value into col's field of r.
func (d *decoder) field(format batchFormat, base int64, col *column, r *store.Record) bool {
	c := &d.c
	if col.kind == kindText || col.kind == kindShared && format == formatInline {
		t, ok := c.Text()
		*col.text(r) = string(t)
		return ok
	}
	n, ok := c.Int()
	switch col.kind {
	case kindShared:
		if !ok || n < 0 || n >= int64(len(d.strs)) {
			return false
		}
		*col.text(r) = d.strs[n]
	case kindTime:
		if format != formatInline {
			n += base
		}
		col.set(r, n)
	default:
		col.set(r, n)
	}
	return ok
}

// request_batch_keys kinds, of the key bits.
var keyKinds = [...]struct {
	bit  uint8
	kind string
}{{keyTenantBit, keyTenant}, {keyModelBit, keyModel}}

const (
	keyTenant = "t"
	keyModel  = "m"
)

const (
	insertBatch = `INSERT INTO request_batches(ts_min, ts_max, n, format, strings, records) VALUES(?,?,?,?,?,?)`
	insertKey   = `INSERT OR IGNORE INTO request_batch_keys(kind, value, seq) VALUES(?,?,?)`
)

// batchStmts are the two statements of writeBatch, bound to a
// transaction, and the format they write. Migration 2 writes
// formatInline with its own statement (the table had no format then).
type batchStmts struct {
	batch, key *sql.Stmt
	format     batchFormat
}

// batchStmts returns the database's prepared statements bound to tx.
func (d *DB) batchStmts(ctx context.Context, tx *sql.Tx) (batchStmts, error) {
	ins, err := d.prepared(ctx, tx, &d.insBatch, insertBatch)
	if err != nil {
		return batchStmts{}, err
	}
	key, err := d.prepared(ctx, tx, &d.insKey, insertKey)
	return batchStmts{ins, key, formatShared}, err
}

// writeBatch inserts recs (at most maxBatchRecords) as one row and its keys.
func writeBatch(ctx context.Context, st batchStmts, recs []store.Record, e *encoder) error {
	lo, hi := batchRange(recs)
	e.format = st.format
	e.encode(recs, lo)
	// As strings, not []byte: SQLite would take a blob for JSONB, and
	// the view's json_each reads text.
	var res sql.Result
	var err error
	if st.format == formatInline {
		res, err = st.batch.ExecContext(ctx, lo, hi, len(recs), string(e.records))
	} else {
		res, err = st.batch.ExecContext(ctx, lo, hi, len(recs), int(st.format), string(e.strings), string(e.records))
	}
	if err != nil {
		return err
	}
	seq, err := res.LastInsertId()
	if err != nil {
		return err
	}
	for i, s := range e.strs {
		for _, k := range keyKinds {
			if e.bits[i]&k.bit == 0 || s == "" {
				continue
			}
			if _, err := st.key.ExecContext(ctx, k.kind, s, seq); err != nil {
				return err
			}
		}
	}
	return nil
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
func insertBatches(ctx context.Context, st batchStmts, recs []store.Record, e *encoder) error {
	for start := 0; start < len(recs); start += maxBatchRecords {
		if err := writeBatch(ctx, st, recs[start:min(start+maxBatchRecords, len(recs))], e); err != nil {
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
	// The old table has the columns of migration 1: none of the optional
	// ones added since.
	var names []string
	for _, c := range columns {
		if !c.optional {
			names = append(names, c.name)
		}
	}
	sel := "SELECT seq, " + strings.Join(names, ", ") + " FROM requests WHERE seq > ? ORDER BY seq LIMIT ?"
	// Prepared on the migrating transaction: the new tables are not
	// visible to the database's other connections until it commits.
	st := batchStmts{format: formatInline}
	var err error
	if st.batch, err = tx.PrepareContext(ctx, `INSERT INTO request_batches(ts_min, ts_max, n, records) VALUES(?,?,?,?)`); err != nil {
		return err
	}
	defer st.batch.Close()
	if st.key, err = tx.PrepareContext(ctx, insertKey); err != nil {
		return err
	}
	defer st.key.Close()
	var after int64
	var e encoder
	for {
		recs, last, err := oldRows(ctx, tx, sel, after)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			break
		}
		if err := insertBatches(ctx, st, recs, &e); err != nil {
			return err
		}
		after = last
	}
	// Migration 3 replaces this view by requestsView.
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

// addChanges is migration 4: records gain the changes column (an
// optional one: older records end before it), so the view is made again.
func addChanges(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `DROP VIEW requests;
	`+requestsView())
	return err
}

// sharedStrings is migration 3: batches gain a format and a strings
// array; the old ones stay formatInline and read as before.
func sharedStrings(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `ALTER TABLE request_batches ADD COLUMN format INTEGER NOT NULL DEFAULT 1;
	ALTER TABLE request_batches ADD COLUMN strings TEXT NOT NULL DEFAULT '[]';
	DROP VIEW requests;
	`+requestsView())
	return err
}
