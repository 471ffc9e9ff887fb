package sqlite

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/omniroute/gateway/internal/store"
)

const insertRequest = `INSERT INTO requests(ts, request_id, tenant_id, tenant_name, model, target, caller_dialect, upstream_dialect,
	status, error_code, attempts, fallbacks, admission_wait_us, ttft_us, latency_us, tokens_in, tokens_out, tokens_cached, cost_nano, client_ip)
	VALUES`

// requestColumns is the number of columns insertRequest names; insertChunk
// rows of them stay well under SQLite's limit of bound variables.
const (
	requestColumns = 20
	insertChunk    = 64
)

var requestRow = "(" + strings.TrimSuffix(strings.Repeat("?,", requestColumns), ",") + ")"

// insertStatements are the INSERTs of 1..insertChunk rows.
var insertStatements = func() (out [insertChunk + 1]string) {
	for n := 1; n <= insertChunk; n++ {
		out[n] = insertRequest + strings.TrimSuffix(strings.Repeat(requestRow+",", n), ",")
	}
	return out
}()

func insertRequests(n int) string { return insertStatements[n] }

const upsertUsage = `INSERT INTO usage_hourly(hour, tenant_id, tenant_name, model, requests, errors, tokens_in, tokens_out, tokens_cached, cost_nano)
	VALUES(?,?,?,?,?,?,?,?,?,?)
	ON CONFLICT(hour, tenant_id, model) DO UPDATE SET tenant_name = excluded.tenant_name,
		requests = requests + excluded.requests, errors = errors + excluded.errors,
		tokens_in = tokens_in + excluded.tokens_in, tokens_out = tokens_out + excluded.tokens_out,
		tokens_cached = tokens_cached + excluded.tokens_cached, cost_nano = cost_nano + excluded.cost_nano`

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
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return describe(d.path, "write the request log to", err)
	}
	defer tx.Rollback()
	// Rows go in multi-row INSERTs of up to insertChunk: one statement
	// per chunk instead of per record is most of the writer's cost saved.
	args := make([]any, 0, insertChunk*requestColumns)
	for start := 0; start < len(recs); start += insertChunk {
		chunk := recs[start:min(start+insertChunk, len(recs))]
		args = args[:0]
		for i := range chunk {
			r := &chunk[i]
			args = append(args, r.Time.UnixMilli(), r.RequestID, r.TenantID, r.TenantName, r.Model, r.Target, r.CallerDialect, r.UpstreamDialect,
				r.Status, r.ErrorCode, r.Attempts, r.Fallbacks, r.AdmissionWait.Microseconds(), r.TTFT.Microseconds(), r.Latency.Microseconds(),
				r.TokensIn, r.TokensOut, r.TokensCached, r.CostNano, string(r.ClientIP))
		}
		if _, err := tx.ExecContext(ctx, insertRequests(len(chunk)), args...); err != nil {
			return describe(d.path, "write the request log to", err)
		}
	}
	sums := map[usageKey]*store.UsageRow{}
	var order []usageKey
	for i := range recs {
		r := &recs[i]
		k := usageKey{hour: r.Time.Unix() / 3600 * 3600, tenant: r.TenantID, model: r.Model}
		u := sums[k]
		if u == nil {
			u = &store.UsageRow{TenantName: r.TenantName}
			sums[k] = u
			order = append(order, k)
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
	for _, k := range order {
		u := sums[k]
		if _, err := tx.ExecContext(ctx, upsertUsage, k.hour, k.tenant, u.TenantName, k.model, u.Requests, u.Errors,
			u.TokensIn, u.TokensOut, u.TokensCached, u.CostNano); err != nil {
			return describe(d.path, "write usage to", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return describe(d.path, "write the request log to", err)
	}
	return nil
}

// MaxPage bounds Filter.Limit.
const MaxPage = 1000

// Requests implements store.LogStore. The cursor is the sequence number of
// the last record returned; pages are in descending sequence, so records
// inserted meanwhile (higher numbers) never shift a later page.
func (d *DB) Requests(ctx context.Context, f store.Filter) (store.Page, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, MaxPage)
	var where []string
	var args []any
	if f.Cursor != "" {
		seq, err := strconv.ParseInt(f.Cursor, 10, 64)
		if err != nil || seq <= 0 {
			return store.Page{}, fmt.Errorf("cursor %q is not one this gateway returned; pass the previous page's next value", f.Cursor)
		}
		where, args = append(where, "seq < ?"), append(args, seq)
	}
	if f.Tenant != "" {
		where, args = append(where, "(tenant_id = ? OR tenant_name = ?)"), append(args, f.Tenant, f.Tenant)
	}
	if f.Model != "" {
		where, args = append(where, "model = ?"), append(args, f.Model)
	}
	switch {
	case f.Status >= 2 && f.Status <= 5:
		where, args = append(where, "status >= ? AND status < ?"), append(args, f.Status*100, f.Status*100+100)
	case f.Status != 0:
		where, args = append(where, "status = ?"), append(args, f.Status)
	}
	if !f.Since.IsZero() {
		where, args = append(where, "ts >= ?"), append(args, f.Since.UnixMilli())
	}
	if !f.Until.IsZero() {
		where, args = append(where, "ts < ?"), append(args, f.Until.UnixMilli())
	}
	q := `SELECT seq, ts, request_id, tenant_id, tenant_name, model, target, caller_dialect, upstream_dialect, status, error_code,
		attempts, fallbacks, admission_wait_us, ttft_us, latency_us, tokens_in, tokens_out, tokens_cached, cost_nano, client_ip FROM requests`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY seq DESC LIMIT ?"
	args = append(args, limit+1)
	rows, err := d.db.QueryContext(ctx, q, args...)
	if err != nil {
		return store.Page{}, describe(d.path, "read the request log from", err)
	}
	defer rows.Close()
	var p store.Page
	var last int64
	for rows.Next() {
		if len(p.Records) == limit {
			p.Next = strconv.FormatInt(last, 10)
			break
		}
		var r store.Record
		var ts, wait, ttft, lat int64
		var ip string
		if err := rows.Scan(&last, &ts, &r.RequestID, &r.TenantID, &r.TenantName, &r.Model, &r.Target, &r.CallerDialect, &r.UpstreamDialect,
			&r.Status, &r.ErrorCode, &r.Attempts, &r.Fallbacks, &wait, &ttft, &lat, &r.TokensIn, &r.TokensOut, &r.TokensCached, &r.CostNano, &ip); err != nil {
			return store.Page{}, describe(d.path, "read the request log from", err)
		}
		r.Time = time.UnixMilli(ts).UTC()
		r.AdmissionWait, r.TTFT, r.Latency = time.Duration(wait)*time.Microsecond, time.Duration(ttft)*time.Microsecond, time.Duration(lat)*time.Microsecond
		r.ClientIP = store.IPClass(ip)
		p.Records = append(p.Records, r)
	}
	if err := rows.Err(); err != nil {
		return store.Page{}, describe(d.path, "read the request log from", err)
	}
	return p, nil
}

// Usage implements store.LogStore.
func (d *DB) Usage(ctx context.Context, uq store.UsageQuery) ([]store.UsageRow, error) {
	width := int64(86400)
	switch uq.Bucket {
	case store.Hour:
		width = 3600
	case "", store.Day:
	default:
		return nil, fmt.Errorf("bucket %q is not hour or day", uq.Bucket)
	}
	var where []string
	var args = []any{width, width}
	if !uq.Since.IsZero() {
		where, args = append(where, "hour >= ?"), append(args, uq.Since.Unix()/3600*3600)
	}
	if !uq.Until.IsZero() {
		where, args = append(where, "hour < ?"), append(args, uq.Until.Unix())
	}
	if uq.Tenant != "" {
		where, args = append(where, "(tenant_id = ? OR tenant_name = ?)"), append(args, uq.Tenant, uq.Tenant)
	}
	q := `SELECT hour / ? * ? AS b, tenant_id, max(tenant_name), model, sum(requests), sum(errors), sum(tokens_in), sum(tokens_out),
		sum(tokens_cached), sum(cost_nano) FROM usage_hourly`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " GROUP BY b, tenant_id, model ORDER BY b, tenant_id, model"
	rows, err := d.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, describe(d.path, "read usage from", err)
	}
	defer rows.Close()
	var out []store.UsageRow
	for rows.Next() {
		var u store.UsageRow
		var start int64
		if err := rows.Scan(&start, &u.TenantID, &u.TenantName, &u.Model, &u.Requests, &u.Errors, &u.TokensIn, &u.TokensOut, &u.TokensCached, &u.CostNano); err != nil {
			return nil, describe(d.path, "read usage from", err)
		}
		u.Start = time.Unix(start, 0).UTC()
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, describe(d.path, "read usage from", err)
	}
	return out, nil
}

// Spend implements store.LogStore. since is rounded down to its hour, the
// aggregates' resolution; budgets start at midnight and on the first, which
// are whole hours.
func (d *DB) Spend(ctx context.Context, since time.Time) (map[string]int64, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT tenant_id, sum(cost_nano) FROM usage_hourly WHERE hour >= ? GROUP BY tenant_id`, since.Unix()/3600*3600)
	if err != nil {
		return nil, describe(d.path, "read spend from", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var id string
		var n int64
		if err := rows.Scan(&id, &n); err != nil {
			return nil, describe(d.path, "read spend from", err)
		}
		out[id] = n
	}
	if err := rows.Err(); err != nil {
		return nil, describe(d.path, "read spend from", err)
	}
	return out, nil
}

// deleteChunk bounds one delete so the write lock is held briefly.
const deleteChunk = 5000

// DeleteBefore implements store.LogStore, in chunks.
func (d *DB) DeleteBefore(ctx context.Context, requests, usage time.Time) (int64, error) {
	var total int64
	for {
		res, err := d.db.ExecContext(ctx, `DELETE FROM requests WHERE seq IN (SELECT seq FROM requests WHERE ts < ? ORDER BY seq LIMIT ?)`,
			requests.UnixMilli(), deleteChunk)
		if err != nil {
			return total, describe(d.path, "apply retention to", err)
		}
		n, _ := res.RowsAffected()
		total += n
		if n < deleteChunk {
			break
		}
	}
	if _, err := d.db.ExecContext(ctx, `DELETE FROM usage_hourly WHERE hour < ?`, usage.Unix()); err != nil {
		return total, describe(d.path, "apply retention to", err)
	}
	return total, nil
}
