package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/omniroute/gateway/internal/store"
)

// inTx runs fn in one transaction and commits what it did; fn's error
// (which fn describes itself) rolls it back. A failure to begin or to
// commit is described as failing to doing the database, as
// describe words it.
func (d *DB) inTx(ctx context.Context, doing string, fn func(tx *sql.Tx) error) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return describe(d.path, doing, err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return describe(d.path, doing, err)
	}
	return nil
}

// prepared returns *slot bound to tx, preparing query into it on first
// use: parsing a statement again for every batch cost a third of the
// writer's time. database/sql re-uses a prepared statement on the
// connection a transaction holds (Tx.StmtContext), preparing it there the
// first time.
func (d *DB) prepared(ctx context.Context, tx *sql.Tx, slot **sql.Stmt, query string) (*sql.Stmt, error) {
	d.mu.Lock()
	st := *slot
	if st == nil {
		var err error
		if st, err = d.db.PrepareContext(ctx, query); err != nil {
			d.mu.Unlock()
			return nil, err
		}
		*slot = st
	}
	d.mu.Unlock()
	return tx.StmtContext(ctx, st), nil
}

// upsertInto adds a usage row to table, keyed by its time column.
func upsertInto(table, at string) string {
	return `INSERT INTO ` + table + `(` + at + `, tenant_id, tenant_name, model, requests, errors, tokens_in, tokens_out, tokens_cached, cost_nano)
	VALUES(?,?,?,?,?,?,?,?,?,?)
	ON CONFLICT(` + at + `, tenant_id, model) DO UPDATE SET tenant_name = excluded.tenant_name,
		requests = requests + excluded.requests, errors = errors + excluded.errors,
		tokens_in = tokens_in + excluded.tokens_in, tokens_out = tokens_out + excluded.tokens_out,
		tokens_cached = tokens_cached + excluded.tokens_cached, cost_nano = cost_nano + excluded.cost_nano`
}

var (
	upsertUsage = upsertInto("usage_hourly", "hour")
	upsertDaily = upsertInto("usage_daily", "day")
)

type usageKey struct {
	hour          int64
	tenant, model string
}

// InsertRequests implements store.LogStore: the records and their usage in
// one transaction, the usage summed per hour, tenant and model first.
func (d *DB) InsertRequests(ctx context.Context, recs []store.Record) error {
	if len(recs) == 0 {
		return nil
	}
	return d.inTx(ctx, "write the request log to", func(tx *sql.Tx) error { return d.insertRequests(ctx, tx, recs) })
}

// insertRequests is InsertRequests inside its transaction.
func (d *DB) insertRequests(ctx context.Context, tx *sql.Tx, recs []store.Record) error {
	st, err := d.batchStmts(ctx, tx)
	if err != nil {
		return describe(d.path, "write the request log to", err)
	}
	e := d.encoders.Get().(*encoder)
	defer d.encoders.Put(e)
	if err := insertBatches(ctx, st, recs, e); err != nil {
		return describe(d.path, "write the request log to", err)
	}
	sums := map[usageKey]*store.UsageRow{}
	var order []usageKey
	var lastKey usageKey
	var u *store.UsageRow
	for i := range recs {
		r := &recs[i]
		// Consecutive records mostly share their key: compare before
		// hashing.
		if k := (usageKey{hour: r.Time.Unix() / 3600 * 3600, tenant: r.TenantID, model: r.Model}); u == nil || k != lastKey {
			if u = sums[k]; u == nil {
				u = &store.UsageRow{TenantName: r.TenantName}
				sums[k] = u
				order = append(order, k)
			}
			lastKey = k
		}
		u.Requests++
		if r.Status >= 400 {
			u.Errors++
		}
		u.TokensIn += r.TokensIn
		u.TokensOut += r.TokensOut
		u.TokensCached += r.TokensCached
		u.CostNano += r.CostNano
	}
	up, err := d.prepared(ctx, tx, &d.upsert, upsertUsage)
	if err != nil {
		return describe(d.path, "write usage to", err)
	}
	daily, err := d.prepared(ctx, tx, &d.upDaily, upsertDaily)
	if err != nil {
		return describe(d.path, "write usage to", err)
	}
	for _, k := range order {
		u := sums[k]
		for _, w := range [2]struct {
			st *sql.Stmt
			at int64
		}{{up, k.hour}, {daily, k.hour / 86400 * 86400}} {
			if _, err := w.st.ExecContext(ctx, w.at, k.tenant, u.TenantName, k.model, u.Requests, u.Errors,
				u.TokensIn, u.TokensOut, u.TokensCached, u.CostNano); err != nil {
				return describe(d.path, "write usage to", err)
			}
		}
	}
	return nil
}

// MaxPage bounds Filter.Limit.
const MaxPage = 1000

// MaxScanBatches bounds the batches one page of Requests reads (about
// MaxScanBatches × maxBatchRecords records decoded): a filter that
// matches little of a long log answers a short page, or none, with a
// cursor to go on from, rather than reading the whole log in one call.
const MaxScanBatches = 256

// Requests implements store.LogStore. The cursor is the position (batch
// seq << 12 | index) of the last record returned; pages go down in
// position, so records inserted meanwhile (higher positions) never shift
// a later page. Batches are read newest first and filtered here; the
// tenant and model filters skip batches without them through
// request_batch_keys, the time filters through each batch's range.
func (d *DB) Requests(ctx context.Context, f store.Filter) (store.Page, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, MaxPage)
	var where []string
	var args []any
	cseq, cidx := int64(math.MaxInt64), int64(0)
	if f.Cursor != "" {
		pos, err := strconv.ParseInt(f.Cursor, 10, 64)
		if err != nil || pos>>positionBits <= 0 {
			return store.Page{}, fmt.Errorf("cursor %q is not one this gateway returned; pass the previous page's next value", f.Cursor)
		}
		cseq, cidx = pos>>positionBits, pos&(1<<positionBits-1)
		where, args = append(where, "seq <= ?"), append(args, cseq)
	}
	if f.Tenant != "" {
		where, args = append(where, "EXISTS (SELECT 1 FROM request_batch_keys k WHERE k.kind = ? AND k.value = ? AND k.seq = b.seq)"), append(args, keyTenant, f.Tenant)
	}
	if f.Model != "" {
		where, args = append(where, "EXISTS (SELECT 1 FROM request_batch_keys k WHERE k.kind = ? AND k.value = ? AND k.seq = b.seq)"), append(args, keyModel, f.Model)
	}
	// The unary + keeps the planner on the primary key, newest first,
	// rather than an index it would then have to sort.
	if !f.Since.IsZero() {
		// The first batch with a record that recent (through the ts_max
		// index) bounds the scan; with none, nothing is read.
		where = append(where, "+ts_max >= ?", "seq >= coalesce((SELECT min(seq) FROM request_batches WHERE ts_max >= ?), 9223372036854775807)")
		args = append(args, f.Since.UnixMilli(), f.Since.UnixMilli())
	}
	if !f.Until.IsZero() {
		where, args = append(where, "+ts_min < ?"), append(args, f.Until.UnixMilli())
	}
	q := "SELECT seq, format, ts_min, strings, records FROM request_batches b"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY seq DESC"
	rows, err := d.db.QueryContext(ctx, q, args...)
	if err != nil {
		return store.Page{}, describe(d.path, "read the request log from", err)
	}
	defer rows.Close()
	var p store.Page
	var dec decoder
	var batch []store.Record
	var strs, doc []byte
	var last int64
	scanned := 0
scan:
	for rows.Next() {
		var seq, base int64
		var format batchFormat
		if err := rows.Scan(&seq, &format, &base, &strs, &doc); err != nil {
			return store.Page{}, describe(d.path, "read the request log from", err)
		}
		if scanned == MaxScanBatches {
			// The page's scan bound: the next page goes on from here
			// (this batch, unread, and the older ones).
			p.Next = strconv.FormatInt((seq+1)<<positionBits, 10)
			break
		}
		scanned++
		if batch, err = dec.decode(format, base, strs, doc, batch[:0]); err != nil {
			return store.Page{}, &store.Error{Full: fmt.Sprintf("database %s: %v; the file was changed by something other than this gateway", d.path, err),
				Public: "the request log in the database is damaged (changed by something other than this gateway); the gateway's log names the file", Err: err}
		}
		for i := len(batch) - 1; i >= 0; i-- {
			if seq == cseq && int64(i) >= cidx || !f.Match(&batch[i]) {
				continue
			}
			if len(p.Records) == limit {
				p.Next = strconv.FormatInt(last, 10)
				break scan
			}
			p.Records = append(p.Records, batch[i])
			last = seq<<positionBits | int64(i)
		}
	}
	if err := rows.Err(); err != nil {
		return store.Page{}, describe(d.path, "read the request log from", err)
	}
	return p, nil
}

// usageWhere is the usage table of q's bucket (usage_hourly, or
// usage_daily for days: both keyed by time, tenant id and model) and the
// filter of q's window, tenant and model. A day bucket counts whole UTC
// days: since is rounded down to its day.
func usageWhere(uq *store.UsageQuery) (table, at string, where []string, args []any, err error) {
	width := int64(86400)
	switch uq.Bucket {
	case store.Hour:
		table, at, width = "usage_hourly", "hour", 3600
	case "", store.Day:
		table, at = "usage_daily", "day"
	default:
		return "", "", nil, nil, fmt.Errorf("bucket %q is not hour or day", uq.Bucket)
	}
	if !uq.Since.IsZero() {
		where, args = append(where, at+" >= ?"), append(args, uq.Since.Unix()/width*width)
	}
	if !uq.Until.IsZero() {
		where, args = append(where, at+" < ?"), append(args, uq.Until.Unix())
	}
	if uq.Tenant != "" {
		where, args = append(where, "(tenant_id = ? OR tenant_name = ?)"), append(args, uq.Tenant, uq.Tenant)
	}
	if uq.Model != "" {
		where, args = append(where, "model = ?"), append(args, uq.Model)
	}
	return table, at, where, args, nil
}

// Usage implements store.LogStore: at most q.Limit rows (MaxUsagePage),
// ordered by bucket, tenant id and model, after q.After. Each bucket
// has its own table keyed in that order, so a page is a range of the
// primary key: it reads the rows it returns (and those its filters
// skip), whatever the table holds.
func (d *DB) Usage(ctx context.Context, uq store.UsageQuery) ([]store.UsageRow, error) {
	table, at, where, args, err := usageWhere(&uq)
	if err != nil {
		return nil, err
	}
	if a := uq.After; a != nil {
		where, args = append(where, "("+at+", tenant_id, model) > (?, ?, ?)"), append(args, a.Start.Unix(), a.TenantID, a.Model)
	}
	limit := uq.Limit
	if limit <= 0 || limit > store.MaxUsagePage {
		limit = store.MaxUsagePage
	}
	q := "SELECT " + at + ", tenant_id, tenant_name, model, requests, errors, tokens_in, tokens_out, tokens_cached, cost_nano FROM " + table
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY " + at + ", tenant_id, model LIMIT ?"
	return queryRows(ctx, d, "read usage from", q, append(args, limit), func(rows *sql.Rows, u *store.UsageRow) error {
		var start int64
		err := rows.Scan(&start, &u.TenantID, &u.TenantName, &u.Model, &u.Requests, &u.Errors, &u.TokensIn, &u.TokensOut, &u.TokensCached, &u.CostNano)
		u.Start = time.Unix(start, 0).UTC()
		return err
	})
}

// UsageTotal implements store.LogStore: one pass over the window's rows
// of q's bucket table, nothing kept but the sums.
func (d *DB) UsageTotal(ctx context.Context, uq store.UsageQuery) (store.UsageRow, error) {
	table, _, where, args, err := usageWhere(&uq)
	if err != nil {
		return store.UsageRow{}, err
	}
	q := `SELECT coalesce(sum(requests),0), coalesce(sum(errors),0), coalesce(sum(tokens_in),0), coalesce(sum(tokens_out),0),
		coalesce(sum(tokens_cached),0), coalesce(sum(cost_nano),0) FROM ` + table
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	var t store.UsageRow
	if err := d.db.QueryRowContext(ctx, q, args...).Scan(&t.Requests, &t.Errors, &t.TokensIn, &t.TokensOut, &t.TokensCached, &t.CostNano); err != nil {
		return store.UsageRow{}, describe(d.path, "read usage from", err)
	}
	return t, nil
}

const upsertRefusal = `INSERT INTO refusals_hourly(hour, tenant_id, tenant_name, code, count) VALUES(?,?,?,?,?)
	ON CONFLICT(hour, tenant_id, code) DO UPDATE SET tenant_name = excluded.tenant_name, count = count + excluded.count`

// AddRefusals implements store.LogStore, in one transaction.
func (d *DB) AddRefusals(ctx context.Context, rs []store.Refusal) error {
	if len(rs) == 0 {
		return nil
	}
	const doing = "write refusal counts to"
	return d.inTx(ctx, doing, func(tx *sql.Tx) error {
		st, err := d.prepared(ctx, tx, &d.refusal, upsertRefusal)
		if err != nil {
			return describe(d.path, doing, err)
		}
		for _, r := range rs {
			if _, err := st.ExecContext(ctx, r.Start.Unix()/3600*3600, r.TenantID, r.TenantName, r.Code, r.Count); err != nil {
				return describe(d.path, doing, err)
			}
		}
		return nil
	})
}

// Refusals implements store.LogStore.
func (d *DB) Refusals(ctx context.Context, uq store.UsageQuery) ([]store.Refusal, error) {
	var where []string
	var args []any
	if !uq.Since.IsZero() {
		where, args = append(where, "hour >= ?"), append(args, uq.Since.Unix()/3600*3600)
	}
	if !uq.Until.IsZero() {
		where, args = append(where, "hour < ?"), append(args, uq.Until.Unix())
	}
	if uq.Tenant != "" {
		where, args = append(where, "(tenant_id = ? OR tenant_name = ?)"), append(args, uq.Tenant, uq.Tenant)
	}
	limit := uq.Limit
	if limit <= 0 || limit > store.MaxUsagePage {
		limit = store.MaxUsagePage
	}
	q := "SELECT min(hour), tenant_id, max(tenant_name), code, sum(count) AS n FROM refusals_hourly"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " GROUP BY tenant_id, code ORDER BY n DESC, tenant_id, code LIMIT ?"
	return queryRows(ctx, d, "read refusal counts from", q, append(args, limit), func(rows *sql.Rows, r *store.Refusal) error {
		var start int64
		err := rows.Scan(&start, &r.TenantID, &r.TenantName, &r.Code, &r.Count)
		r.Start = time.Unix(start, 0).UTC()
		return err
	})
}

// Spend implements store.LogStore. since is rounded down to its hour, the
// aggregates' resolution; budgets start at midnight and on the first, which
// are whole hours.
func (d *DB) Spend(ctx context.Context, since time.Time) (map[string]int64, error) {
	type spent struct {
		id string
		n  int64
	}
	rows, err := queryRows(ctx, d, "read spend from", `SELECT tenant_id, sum(cost_nano) FROM usage_hourly WHERE hour >= ? GROUP BY tenant_id`,
		[]any{since.Unix() / 3600 * 3600}, func(rows *sql.Rows, s *spent) error { return rows.Scan(&s.id, &s.n) })
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(rows))
	for _, s := range rows {
		out[s.id] = s.n
	}
	return out, nil
}

// queryRows runs q and reads each row of its answer with scan into a new
// element; whatever fails (the query, a row, the walk) is described as
// failing to read what from the database (describe).
func queryRows[T any](ctx context.Context, d *DB, what, q string, args []any, scan func(*sql.Rows, *T) error) ([]T, error) {
	rows, err := d.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, describe(d.path, what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := scan(rows, &v); err != nil {
			return nil, describe(d.path, what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, describe(d.path, what, err)
	}
	return out, nil
}

// deleteChunk bounds the batches one delete takes, so the write lock is
// held briefly.
const deleteChunk = 500

// DeleteBefore implements store.LogStore: batches wholly older than
// requests go, in chunks; a batch that straddles the cut keeps its newer
// records.
func (d *DB) DeleteBefore(ctx context.Context, requests, usage time.Time) (int64, error) {
	cut := requests.UnixMilli()
	var total int64
	for {
		n, more, err := d.deleteBatches(ctx, cut)
		total += n
		if err != nil {
			return total, describe(d.path, "apply retention to", err)
		}
		if !more {
			break
		}
	}
	n, err := d.trimStraddlers(ctx, cut)
	total += n
	if err != nil {
		return total, describe(d.path, "apply retention to", err)
	}
	// A day goes once all of it is older than the cut.
	for _, q := range []string{`DELETE FROM usage_hourly WHERE hour < ?`, `DELETE FROM usage_daily WHERE day + 86400 <= ?`, `DELETE FROM refusals_hourly WHERE hour < ?`} {
		if _, err := d.db.ExecContext(ctx, q, usage.Unix()); err != nil {
			return total, describe(d.path, "apply retention to", err)
		}
	}
	return total, nil
}

// deleteBatches deletes up to deleteChunk batches whose newest record is
// older than cut; more says a full chunk went.
func (d *DB) deleteBatches(ctx context.Context, cut int64) (records int64, more bool, err error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, false, err
	}
	defer tx.Rollback()
	const old = `SELECT seq FROM request_batches WHERE ts_max < ? ORDER BY seq LIMIT ?`
	if _, err := tx.ExecContext(ctx, `DELETE FROM request_batch_keys WHERE seq IN (`+old+`)`, cut, deleteChunk); err != nil {
		return 0, false, err
	}
	rows, err := tx.QueryContext(ctx, `DELETE FROM request_batches WHERE seq IN (`+old+`) RETURNING n`, cut, deleteChunk)
	if err != nil {
		return 0, false, err
	}
	batches := 0
	for rows.Next() {
		var n int64
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return 0, false, err
		}
		records += n
		batches++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, false, err
	}
	return records, batches == deleteChunk, tx.Commit()
}

// trimStraddlers rewrites the batches holding records on both sides of
// cut (after deleteBatches, every batch with an older record) without
// the older ones.
func (d *DB) trimStraddlers(ctx context.Context, cut int64) (int64, error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	type straddler struct {
		seq  int64
		keep []store.Record
	}
	var todo []straddler
	var removed int64
	rows, err := tx.QueryContext(ctx, `SELECT seq, format, ts_min, strings, records FROM request_batches WHERE ts_min < ?`, cut)
	if err != nil {
		return 0, err
	}
	var dec decoder
	for rows.Next() {
		var seq, base int64
		var format batchFormat
		var strs, doc []byte
		if err := rows.Scan(&seq, &format, &base, &strs, &doc); err != nil {
			rows.Close()
			return 0, err
		}
		recs, err := dec.decode(format, base, strs, doc, nil)
		if err != nil {
			rows.Close()
			return 0, err
		}
		keep := recs[:0]
		for _, r := range recs {
			if r.Time.UnixMilli() >= cut {
				keep = append(keep, r)
			}
		}
		removed += int64(len(recs) - len(keep))
		todo = append(todo, straddler{seq, keep})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	e := encoder{format: formatShared}
	for _, s := range todo {
		lo, hi := batchRange(s.keep)
		e.encode(s.keep, lo)
		if _, err := tx.ExecContext(ctx, `UPDATE request_batches SET ts_min = ?, ts_max = ?, n = ?, format = ?, strings = ?, records = ? WHERE seq = ?`,
			lo, hi, len(s.keep), int(e.format), string(e.strings), string(e.records), s.seq); err != nil {
			return 0, err
		}
	}
	return removed, tx.Commit()
}
