package datadir

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/omniroute/gateway/internal/lockfile"
	"github.com/omniroute/gateway/internal/store"
	"github.com/omniroute/gateway/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// TestOpenHoldsTheDirectory: a second Open of a held directory is refused
// with lockfile.ErrHeld; Close closes the database Open opened and
// releases the lock, so the directory can be opened again.
func TestOpenHoldsTheDirectory(t *testing.T) {
	dir := t.TempDir()
	h, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Store.Keys(context.Background()); err != nil {
		t.Fatalf("the SQLite store Open opened does not answer: %v", err)
	}
	if _, err := Open(dir, nil); !errors.Is(err, lockfile.ErrHeld) {
		t.Fatalf("second Open of a held directory: %v, want lockfile.ErrHeld", err)
	}
	db := h.Store
	h.Close(nil)
	h.Close(nil) // idempotent
	if _, err := db.Keys(context.Background()); err == nil {
		t.Fatal("the database Open opened is still open after Close")
	}
	h2, err := Open(dir, nil)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	h2.Close(nil)
}

// hostStore is a host's own store: Close must leave it open.
type hostStore struct {
	store.Store
	closed bool
}

func (s *hostStore) Close() error { s.closed = true; return nil }

// TestHostStoreStaysOpen: with the host's store, Open opens no database
// and Close does not close the host's.
func TestHostStoreStaysOpen(t *testing.T) {
	host := &hostStore{}
	h, err := Open(t.TempDir(), host)
	if err != nil {
		t.Fatal(err)
	}
	if h.Store != host {
		t.Fatalf("Store is %T, want the host's", h.Store)
	}
	h.Close(nil)
	if host.closed {
		t.Fatal("Close closed the host's store")
	}
}

// owner is a prepared gateway: Close runs its close hooks.
type owner struct{ hooks []func() }

func (o *owner) OnClose(f func())     { o.hooks = append(o.hooks, f) }
func (o *owner) Logger() *slog.Logger { return nil }
func (o *owner) Close() {
	for _, f := range o.hooks {
		f()
	}
}

// TestHoldReleasesWithItsOwner: Hold hands prepare the directory's store
// and keeps the directory held while its owner runs, releasing it when
// the owner closes; when prepare fails it releases it at once; a held
// directory refuses a second Hold before prepare runs.
func TestHoldReleasesWithItsOwner(t *testing.T) {
	dir := t.TempDir()
	o, err := Hold(dir, nil, func(st store.Store) (*owner, error) {
		if _, err := st.Keys(context.Background()); err != nil {
			t.Errorf("prepare's store does not answer: %v", err)
		}
		return &owner{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	if _, err := Hold(dir, nil, func(store.Store) (*owner, error) { ran = true; return &owner{}, nil }); !errors.Is(err, lockfile.ErrHeld) || ran {
		t.Fatalf("second Hold of a held directory: %v (prepare ran: %v), want lockfile.ErrHeld before prepare", err, ran)
	}
	o.Close()
	failed := errors.New("prepare failed")
	if _, err := Hold(dir, nil, func(store.Store) (*owner, error) { return nil, failed }); !errors.Is(err, failed) {
		t.Fatalf("Hold with a failing prepare: %v, want its error", err)
	}
	h, err := Open(dir, nil)
	if err != nil {
		t.Fatalf("the directory is still held after a failed prepare: %v", err)
	}
	h.Close(nil)
}
