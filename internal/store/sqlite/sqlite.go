// Package sqlite implements store.Store in one SQLite file through
// modernc.org/sqlite, a translation of SQLite to Go: no cgo, so
// CGO_ENABLED=0 builds keep working. The database runs in WAL mode (readers
// never wait for the writer), with a busy timeout, synchronous=FULL (a
// commit is on disk when it returns: neither a killed process nor a
// power cut loses it; the cost is one fsync per commit, which the request
// log's time-bound commits keep to a few a second, docs/tenants.md), and
// versioned migrations recorded in PRAGMA user_version. The files are
// its owner's only (ownerOnly).
//
// database/sql keeps one goroutine per open database for its pool; Close
// stops it.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	msqlite "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/omniroute/gateway/internal/store"
)

// FileName is the database's name in the data directory.
const FileName = "omniroute.db"

// Options tune Open.
type Options struct {
	// BusyTimeout is how long a statement waits for another connection's
	// lock before failing (default 5s). Start-up fails after it when
	// another process holds the database.
	BusyTimeout time.Duration
	// MaxPages caps the database at this many pages (4 KiB each; 0 = no
	// cap); writes beyond fail as a full disk would.
	MaxPages int
}

// DB is the SQLite store.
type DB struct {
	db   *sql.DB
	path string

	// mu guards the prepared statements, made on first use and closed
	// with the database.
	mu                                         sync.Mutex
	insBatch, insKey, upsert, upDaily, refusal *sql.Stmt
	// encoders are the batch writers' buffers and string indexes.
	encoders sync.Pool
}

var _ store.Store = (*DB)(nil)

// migrations are applied in order; user_version is how many ran. Never
// edit one that has shipped: add the next.
//
// A migration is SQL, or Go where it moves data between shapes.
var migrations = []migration{
	// 1: keys, the request log and hourly usage.
	{sql: `CREATE TABLE keys (
		name       TEXT PRIMARY KEY,
		tenant_id  TEXT NOT NULL UNIQUE,
		key_hash   TEXT NOT NULL UNIQUE,
		policy     TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		rotated_at INTEGER NOT NULL DEFAULT 0,
		revoked_at INTEGER NOT NULL DEFAULT 0
	);
	CREATE TABLE requests (
		seq              INTEGER PRIMARY KEY AUTOINCREMENT,
		ts               INTEGER NOT NULL,
		request_id       TEXT NOT NULL,
		tenant_id        TEXT NOT NULL,
		tenant_name      TEXT NOT NULL,
		model            TEXT NOT NULL,
		target           TEXT NOT NULL,
		caller_dialect   TEXT NOT NULL,
		upstream_dialect TEXT NOT NULL,
		status           INTEGER NOT NULL,
		error_code       TEXT NOT NULL,
		attempts         INTEGER NOT NULL,
		fallbacks        INTEGER NOT NULL,
		admission_wait_us INTEGER NOT NULL,
		ttft_us          INTEGER NOT NULL,
		latency_us       INTEGER NOT NULL,
		tokens_in        INTEGER NOT NULL,
		tokens_out       INTEGER NOT NULL,
		tokens_cached    INTEGER NOT NULL,
		cost_nano        INTEGER NOT NULL,
		client_ip        TEXT NOT NULL
	);
	CREATE INDEX requests_ts ON requests(ts);
	CREATE INDEX requests_tenant ON requests(tenant_id, seq);
	CREATE TABLE usage_hourly (
		hour          INTEGER NOT NULL,
		tenant_id     TEXT NOT NULL,
		tenant_name   TEXT NOT NULL,
		model         TEXT NOT NULL,
		requests      INTEGER NOT NULL,
		errors        INTEGER NOT NULL,
		tokens_in     INTEGER NOT NULL,
		tokens_out    INTEGER NOT NULL,
		tokens_cached INTEGER NOT NULL,
		cost_nano     INTEGER NOT NULL,
		PRIMARY KEY (hour, tenant_id, model)
	) WITHOUT ROWID;`},
	// 2: the request log in batches (batch.go), the old table's rows
	// moved over and a requests view in its place.
	{run: migrateToBatches},
	// 3: batches keep their repeated texts once (batch.go's formatShared).
	{run: sharedStrings},
	// 4: records say what the gateway changed to fit the model (changes).
	{run: addChanges},
	// 5: usage per day as well as per hour, so that a page of day rows
	// is a range of the primary key like a page of hours (log.go's
	// Usage); requests refused before their tenant's limits took them,
	// counted per hour, tenant and code (AddRefusals).
	{sql: `CREATE TABLE usage_daily (
		day           INTEGER NOT NULL,
		tenant_id     TEXT NOT NULL,
		tenant_name   TEXT NOT NULL,
		model         TEXT NOT NULL,
		requests      INTEGER NOT NULL,
		errors        INTEGER NOT NULL,
		tokens_in     INTEGER NOT NULL,
		tokens_out    INTEGER NOT NULL,
		tokens_cached INTEGER NOT NULL,
		cost_nano     INTEGER NOT NULL,
		PRIMARY KEY (day, tenant_id, model)
	) WITHOUT ROWID;
	INSERT INTO usage_daily SELECT hour / 86400 * 86400, tenant_id, max(tenant_name), model, sum(requests), sum(errors),
		sum(tokens_in), sum(tokens_out), sum(tokens_cached), sum(cost_nano) FROM usage_hourly GROUP BY 1, tenant_id, model;
	CREATE TABLE refusals_hourly (
		hour        INTEGER NOT NULL,
		tenant_id   TEXT NOT NULL,
		tenant_name TEXT NOT NULL,
		code        TEXT NOT NULL,
		count       INTEGER NOT NULL,
		PRIMARY KEY (hour, tenant_id, code)
	) WITHOUT ROWID;`},
}

type migration struct {
	sql string
	run func(ctx context.Context, tx *sql.Tx) error
}

// SchemaVersion is the version this build writes.
func SchemaVersion() int { return len(migrations) }

// Open opens (creating if needed) the database at path and brings its
// schema up to date. A file that is not a SQLite database, a corrupt one,
// one locked by another process past the busy timeout, or one written by a
// newer gateway is an error that says so and what to do.
func Open(path string, o Options) (*DB, error) {
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("database path %q contains '?' or '#'; choose a data directory without them", path)
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 5 * time.Second
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("cannot create the data directory for the database: %w", err)
	}
	if err := ownerOnly(path); err != nil {
		return nil, err
	}
	dsn := fmt.Sprintf("%s?_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate",
		path, o.BusyTimeout.Milliseconds())
	if o.MaxPages > 0 {
		dsn += fmt.Sprintf("&_pragma=max_page_count(%d)", o.MaxPages)
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, describe(path, "open", err)
	}
	d := &DB{db: db, path: path}
	d.encoders.New = func() any { return &encoder{} }
	if err := d.migrate(); err != nil {
		db.Close()
		return nil, err
	}
	return d, nil
}

// ownerOnly makes the database file, and the WAL and shared-memory files
// SQLite keeps next to it, readable by the gateway's user only. SQLite
// creates a new database 0644 whatever the umask, and its WAL and -shm
// files with the database's mode; the file holds key hashes, tenants'
// names and their traffic. A new file is created 0600 before SQLite opens
// it; an existing one loses its group and other permissions.
func ownerOnly(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		return f.Close()
	case !errors.Is(err, os.ErrExist):
		return fmt.Errorf("cannot create the database file %s: %w", path, err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm()&0o077 == 0 {
			continue
		}
		if err := os.Chmod(p, fi.Mode().Perm()&0o700); err != nil {
			return fmt.Errorf("cannot make the database file %s readable by its owner only: %w; chmod 600 it", p, err)
		}
	}
	return nil
}

// Path is the database file.
func (d *DB) Path() string { return d.path }

// Close closes the database.
func (d *DB) Close() error {
	d.mu.Lock()
	for _, st := range []*sql.Stmt{d.insBatch, d.insKey, d.upsert, d.upDaily, d.refusal} {
		if st != nil {
			st.Close()
		}
	}
	d.insBatch, d.insKey, d.upsert, d.upDaily, d.refusal = nil, nil, nil, nil, nil
	d.mu.Unlock()
	return d.db.Close()
}

func (d *DB) migrate() error {
	ctx := context.Background()
	// An immediate transaction takes the write lock at once, so two
	// gateways starting on one file migrate one after the other, and a
	// file another process holds is reported now rather than at the first
	// write.
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return describe(d.path, "open", err)
	}
	defer tx.Rollback()
	var version int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return describe(d.path, "read the schema version of", err)
	}
	if version > len(migrations) {
		return fmt.Errorf("database %s has schema version %d, newer than this gateway's %d; run the newer gateway, or move the file away to start with an empty one",
			d.path, version, len(migrations))
	}
	// Reading the schema catches a corrupt file whose header is intact;
	// quick_check reads every page, so a file damaged anywhere (a page of
	// the request log or the keys) stops start-up now rather than failing
	// a later write or query.
	var tables int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&tables); err != nil {
		return describe(d.path, "read the schema of", err)
	}
	if err := quickCheck(ctx, tx); err != nil {
		return describe(d.path, "check", err)
	}
	for v := version; v < len(migrations); v++ {
		m := migrations[v]
		var err error
		if m.run != nil {
			err = m.run(ctx, tx)
		} else {
			_, err = tx.ExecContext(ctx, m.sql)
		}
		if err != nil {
			return describe(d.path, fmt.Sprintf("apply migration %d to", v+1), err)
		}
	}
	if version < len(migrations) {
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", len(migrations))); err != nil {
			return describe(d.path, "record the schema version of", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return describe(d.path, "migrate", err)
	}
	return nil
}

// errCorrupt is a quick_check that found damage; describe reports it as
// a corrupt file.
type errCorrupt struct{ problem string }

func (e errCorrupt) Error() string { return "integrity check: " + e.problem }

// quickCheck runs PRAGMA quick_check: every page and index entry is read
// and checked (O(size of the file); measured in docs/tenants.md).
func quickCheck(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, "PRAGMA quick_check(1)")
	if err != nil {
		return err
	}
	defer rows.Close()
	var first string
	if rows.Next() {
		if err := rows.Scan(&first); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if first != "ok" {
		return errCorrupt{first}
	}
	return nil
}

// SQLite result codes (the low byte of extended codes).
const (
	codeBusy    = 5
	codeLocked  = 6
	codeCorrupt = 11
	codeFull    = 13
	codeNotADB  = 26
)

// Code returns the SQLite primary result code of err, or 0 (a failed
// quick_check is SQLITE_CORRUPT).
func Code(err error) int {
	var se *msqlite.Error
	if errors.As(err, &se) {
		return se.Code() & 0xff
	}
	if errors.As(err, new(errCorrupt)) {
		return codeCorrupt
	}
	return 0
}

// IsFull reports whether err is a full database or disk.
func IsFull(err error) bool { return Code(err) == codeFull }

// describe turns driver errors into messages that say what to do: the
// full one names the file (the gateway's log, start-up), the public one
// does not (API answers, store.PublicMessage).
func describe(path, doing string, err error) error {
	var full, public string
	switch Code(err) {
	case codeNotADB, codeCorrupt:
		full = fmt.Sprintf("database %s is corrupt or not a SQLite database (%v); move it away (keys, the request log and usage in it are lost) or restore a backup, then start again", path, err)
		public = "the database is corrupt; the gateway's log names the file and what to do"
	case codeBusy, codeLocked:
		full = fmt.Sprintf("database %s is locked by another process (%v); stop the other gateway using this data directory, or set OMNIROUTE_DATA_DIR to another one", path, err)
		public = "the database is locked by another process; the gateway's log names the file and what to do"
	case codeFull:
		full = fmt.Sprintf("cannot %s database %s: the disk or database is full (%v); free space", doing, path, err)
		public = "cannot " + doing + " the database: the disk or database is full; free space"
	default:
		full = fmt.Sprintf("cannot %s database %s: %v", doing, path, err)
		public = "cannot " + doing + " the database; the gateway's log has the details"
	}
	return &store.Error{Full: full, Public: public, Err: err}
}
