// Package sqlite implements store.Store in one SQLite file through
// modernc.org/sqlite, a translation of SQLite to Go: no cgo, so
// CGO_ENABLED=0 builds keep working. The database runs in WAL mode (readers
// never wait for the writer), with a busy timeout, synchronous=NORMAL (a
// power cut may lose the last batches, never corrupt the file), and
// versioned migrations recorded in PRAGMA user_version.
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
	mu                       sync.Mutex
	insBatch, insKey, upsert *sql.Stmt
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
	dsn := fmt.Sprintf("%s?_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate",
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

// Path is the database file.
func (d *DB) Path() string { return d.path }

// Close closes the database.
func (d *DB) Close() error {
	d.mu.Lock()
	for _, st := range []*sql.Stmt{d.insBatch, d.insKey, d.upsert} {
		if st != nil {
			st.Close()
		}
	}
	d.insBatch, d.insKey, d.upsert = nil, nil, nil
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
	// Reading the schema catches a corrupt file whose header is intact.
	var tables int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&tables); err != nil {
		return describe(d.path, "read the schema of", err)
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

// SQLite result codes (the low byte of extended codes).
const (
	codeBusy    = 5
	codeLocked  = 6
	codeCorrupt = 11
	codeFull    = 13
	codeNotADB  = 26
)

// Code returns the SQLite primary result code of err, or 0.
func Code(err error) int {
	var se *msqlite.Error
	if errors.As(err, &se) {
		return se.Code() & 0xff
	}
	return 0
}

// IsFull reports whether err is a full database or disk.
func IsFull(err error) bool { return Code(err) == codeFull }

// describe turns driver errors into messages that say what to do.
func describe(path, doing string, err error) error {
	switch Code(err) {
	case codeNotADB, codeCorrupt:
		return fmt.Errorf("database %s is corrupt or not a SQLite database (%w); move it away (keys, the request log and usage in it are lost) or restore a backup, then start again", path, err)
	case codeBusy, codeLocked:
		return fmt.Errorf("database %s is locked by another process (%w); stop the other gateway using this data directory, or set OMNIROUTE_DATA_DIR to another one", path, err)
	case codeFull:
		return fmt.Errorf("cannot %s database %s: the disk or database is full (%w); free space", doing, path, err)
	}
	return fmt.Errorf("cannot %s database %s: %w", doing, path, err)
}
