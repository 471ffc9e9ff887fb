// Package datadir is what a gateway holds in its data directory for as
// long as it runs: the lock that makes it the only gateway there (two
// would overwrite each other's service state and database), and the
// SQLite store of API keys, the request log and usage, unless the host
// brings its own store. The composition root opens it before anything
// else and hands the store to the front end; transport never opens a
// file of its own.
package datadir

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/omniroute/gateway/internal/lockfile"
	"github.com/omniroute/gateway/internal/store"
	"github.com/omniroute/gateway/internal/store/sqlite"
)

// Held is a data directory a gateway holds.
type Held struct {
	// Store is the host's store, else the SQLite database Open opened.
	Store store.Store
	lock  *lockfile.Lock
	own   store.Store // the database Open opened (closed by Close); nil for a host's
}

// Open takes dir's lock (lockfile.ErrHeld while another gateway holds
// it), then opens <dir>/omniroute.db unless host is a store of the host's
// own. On an error nothing is left held.
func Open(dir string, host store.Store) (*Held, error) {
	l, err := lockfile.Acquire(dir)
	if err != nil {
		return nil, err
	}
	h := &Held{Store: host, lock: l}
	if host == nil {
		db, err := sqlite.Open(filepath.Join(dir, sqlite.FileName), sqlite.Options{})
		if err != nil {
			l.Release()
			return nil, fmt.Errorf("cannot start: %w", err)
		}
		h.Store, h.own = db, db
	}
	return h, nil
}

// Close closes the database Open opened (never a host's store), then
// releases the lock. A failed close is logged on log: the last request
// log batch may be lost. It is idempotent.
func (h *Held) Close(log *slog.Logger) {
	if h.own != nil {
		if err := h.own.Close(); err != nil && log != nil {
			log.Warn("closing the database failed; the last request log batch may be lost", "err", err)
		}
		h.own = nil
	}
	h.lock.Release()
}

// Owner is what holds a directory once Hold prepared it: the gateway's
// assembly (transport.Assembly), whose close hooks run when it closes.
type Owner interface {
	OnClose(f func())
	Logger() *slog.Logger
}

// Hold opens dir (Open) and prepares on its store what will own it: the
// directory is released at once when prepare fails, else when the owner
// closes, so the lock and the database live as long as the gateway and
// no error path of a composition can leave them held.
func Hold[A Owner](dir string, host store.Store, prepare func(store.Store) (A, error)) (A, error) {
	h, err := Open(dir, host)
	if err != nil {
		var none A
		return none, err
	}
	a, err := prepare(h.Store)
	if err != nil {
		h.Close(nil)
		return a, err
	}
	a.OnClose(func() { h.Close(a.Logger()) })
	return a, nil
}
