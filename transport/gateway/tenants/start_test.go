package tenants

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omniroute/gateway/actors/keys"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/config"
	ikeys "github.com/omniroute/gateway/internal/keys"
	"github.com/omniroute/gateway/internal/store"
	"github.com/omniroute/gateway/internal/store/sqlite"
	"github.com/omniroute/gateway/internal/store/sqlite/sqlitetest"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/internal/tenantlimit"
	"github.com/omniroute/gateway/internal/tenantpolicy"
	"github.com/omniroute/gateway/internal/testutil"
)

// source is a gateway being composed, as the tenant layer sees it.
type source struct {
	db       store.Store
	clk      clock.Clock
	mode     config.RequestLogMode
	lines    bytes.Buffer
	mu       sync.Mutex
	res      *tenant.Resolver
	cfg      []keys.ConfigTenant
	attached Port
}

func (s *source) Clock() clock.Clock   { return s.clk }
func (s *source) Logger() *slog.Logger { return slog.New(slog.DiscardHandler) }
func (s *source) Store() store.Store   { return s.db }
func (s *source) RequestLogLines() *slog.Logger {
	return slog.New(slog.NewJSONHandler(lockedWriter{s}, nil))
}
func (s *source) AttachTenants(p Port) { s.attached = p }
func (s *source) KeysConfig() (*tenant.Resolver, []keys.ConfigTenant) {
	return s.res, s.cfg
}

func (s *source) Env() config.Env {
	var e config.Env
	e.RequestLog.Mode = s.mode
	e.Server.LogFormat = "json"
	return e
}

type lockedWriter struct{ s *source }

func (w lockedWriter) Write(b []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.s.lines.Write(b)
}

// failingSpend is the real store whose spend read fails.
type failingSpend struct{ *sqlite.DB }

func (failingSpend) Spend(context.Context, time.Time) (map[string]int64, error) {
	return nil, errors.New("disk on fire")
}

func newSource(t *testing.T, db store.Store) *source {
	t.Helper()
	res, err := tenant.NewResolver([]byte("0123456789abcdef0123"), tenant.ModeKeys, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &source{db: db, clk: clock.NewFake(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)), res: res, mode: "both"}
}

// TestStartHandsThePipelineItsPort: Start spawns the layer and attaches
// the port; through it a key created is identified, weighted and limited
// at once, a request reserved and settled, a record logged (a line on the
// request log's output) and the health section reads the actors.
func TestStartHandsThePipelineItsPort(t *testing.T) {
	sys := testutil.ActorSystem(t)
	src := newSource(t, sqlitetest.Open(t))
	src.clk = clock.Real{} // the writer commits on its tick
	if err := Start(sys, src, Cluster{}); err != nil {
		t.Fatal(err)
	}
	p := src.attached
	if p == nil {
		t.Fatal("Start did not attach the port")
	}
	defer p.Stop()
	if !p.Logging() {
		t.Fatal("the request log is on (both) but the port says it takes no records")
	}
	_, secret, err := p.Create("heavy", tenantpolicy.Policy{Weight: 4, RequestsPerMinute: 1})
	if err != nil {
		t.Fatal(err)
	}
	e, ok := p.Keys().Lookup([]byte(secret))
	if !ok {
		t.Fatal("a key created through the port does not authenticate")
	}
	if w := p.Shares().Weight(e.TenantID); w != 4 {
		t.Fatalf("weight %d once Create returned, want 4", w)
	}
	now := src.clk.Now()
	req := tenantlimit.Request{Model: []byte("m")}
	res, r := p.Reserve(e.TenantID, &req, now)
	if !r.Allowed {
		t.Fatal("the first request of a key allowed 1 a minute was refused")
	}
	p.Settle(&res, tenantlimit.Usage{Known: true}, now)
	if _, r := p.Reserve(e.TenantID, &req, now); r.Allowed {
		t.Fatal("the second request in the minute was allowed: the limiter does not follow the keys")
	}
	rec := store.Record{Time: now, Model: "m", Status: 200}
	p.Log(&rec, []byte("req_1"), e.TenantID.Bytes())
	testutil.Until(t, "the record's line", func() bool {
		src.mu.Lock()
		defer src.mu.Unlock()
		return strings.Contains(src.lines.String(), "req_1")
	})
	body, status := p.Health()
	if m, ok := body.(map[string]any); !ok || status != "ok" || m["activeKeys"] != 1 || m["limitedTenants"] != 1 || m["keyStore"] != "local" {
		t.Fatalf("health %v %s", body, status)
	}
	if ws := p.Windows(); len(ws) == 0 || ws[0].Budget != "heavy" {
		t.Fatalf("windows %+v", ws)
	}
}

// TestStartStopsWhenSpendCannotBeRead: a tenant with a budget whose spend
// cannot be read stops start-up (serving would forget what it spent);
// nothing is attached and nothing Start spawned is left running (goleak,
// and a second Start on a readable store works).
func TestStartStopsWhenSpendCannotBeRead(t *testing.T) {
	sys := testutil.ActorSystem(t)
	db := sqlitetest.Open(t)
	src := newSource(t, failingSpend{db})
	src.cfg = []keys.ConfigTenant{{Name: "budgeted", KeySHA256: ikeys.Digest([]byte("k")), Policy: tenantpolicy.Policy{DailyBudgetUSD: 1}}}
	err := Start(sys, src, Cluster{})
	if err == nil || !strings.Contains(err.Error(), "disk on fire") || !strings.Contains(err.Error(), "cannot start") {
		t.Fatalf("Start on an unreadable spend: %v", err)
	}
	if src.attached != nil {
		t.Fatal("a failed Start attached the port")
	}
	ok := newSource(t, db)
	ok.cfg = src.cfg
	if err := Start(sys, ok, Cluster{}); err != nil {
		t.Fatal(err)
	}
	ok.attached.Stop()
}
