package keys

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/keys"
	"github.com/omniroute/gateway/internal/store"
	"github.com/omniroute/gateway/internal/store/sqlite"
	"github.com/omniroute/gateway/internal/store/sqlite/sqlitetest"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/internal/tenantpolicy"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

var resolver, _ = tenant.NewResolver([]byte("0123456789abcdef0123"), tenant.ModeKeys, false, nil)

type fixture struct {
	h       *Handle
	db      *sqlite.DB
	changes atomic.Int64
	sys     *actor.ActorSystem
}

func spawn(t *testing.T, path string) *fixture {
	t.Helper()
	db, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{db: db, sys: testutil.ActorSystem(t)}
	h, err := Spawn(f.sys, Options{Store: db, Resolver: resolver, Clock: clock.NewFake(time.Date(2026, 3, 14, 10, 0, 0, 0, time.UTC)),
		Config: []ConfigTenant{{Name: "ops", KeySHA256: sha256.Sum256([]byte("ops-key")), Policy: tenantpolicy.Policy{Class: "batch"}}}})
	if err != nil {
		t.Fatal(err)
	}
	f.h = h
	countPublications(t, f.sys, h, &f.changes)
	t.Cleanup(f.stop)
	return f
}

// spawnOn starts the actor on st with the store timeout given, stopped
// when the test ends.
func spawnOn(t *testing.T, st store.KeyStore, timeout time.Duration) *Handle {
	t.Helper()
	h, err := Spawn(testutil.ActorSystem(t), Options{Store: st, Resolver: resolver, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Stop)
	return h
}

func (f *fixture) stop() {
	if f.h != nil {
		f.h.Stop()
		f.db.Close()
		f.h = nil
	}
}

func code(err error) string {
	var e *keys.Error
	if errors.As(err, &e) {
		return e.Code + "/" + e.Field
	}
	return "not a keys.Error: " + errFmt(err)
}

func errFmt(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

func TestKeyLifecycle(t *testing.T) {
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	f := spawn(t, path)
	h := f.h
	// The config tenant authenticates and is listed, read-only.
	if e, ok := h.Lookup([]byte("ops-key")); !ok || e.Source != keys.FromConfig || e.TenantID != resolver.IDForKey([]byte("ops-key")) {
		t.Fatalf("config tenant: %+v %v", e, ok)
	}
	info, secret, err := h.Create("ci", tenantpolicy.Policy{RequestsPerMinute: 60})
	if err != nil || !strings.HasPrefix(secret, keys.SecretPrefix) || info.Name != "ci" || info.Source != keys.FromStore {
		t.Fatalf("create: %+v %q %v", info, secret, err)
	}
	e, ok := h.Lookup([]byte(secret))
	if !ok || e.TenantID != resolver.IDForKey([]byte(secret)) || e.Policy.RequestsPerMinute != 60 || e.TenantID.String() != info.TenantID {
		t.Fatalf("new key does not authenticate as its tenant: %+v %v", e, ok)
	}
	// Listing never shows a secret.
	b, _ := json.Marshal(h.Snapshot().Infos())
	if strings.Contains(string(b), secret) || strings.Contains(string(b), secret[len(keys.SecretPrefix):]) {
		t.Fatalf("listing leaks the secret: %s", b)
	}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"duplicate name", second(h.Create("ci", tenantpolicy.Policy{})), "duplicate_key_name/name"},
		{"config tenant's name", second(h.Create("ops", tenantpolicy.Policy{})), "duplicate_key_name/name"},
		{"bad name", second(h.Create("has space", tenantpolicy.Policy{})), "invalid_key_name/name"},
		{"bad policy", second(h.Create("x", tenantpolicy.Policy{MaxConcurrent: -1})), "invalid_policy/max_concurrent"},
		{"config tenant is read-only", first(h.Revoke("ops")), "read_only_tenant/name"},
		{"unknown key", first(h.UpdatePolicy("nope", tenantpolicy.Policy{})), "key_not_found/name"},
	} {
		if got := code(c.err); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	// A new policy is in force on the next lookup.
	if _, err := h.UpdatePolicy("ci", tenantpolicy.Policy{RequestsPerMinute: 5, MaxConcurrent: 2}); err != nil {
		t.Fatal(err)
	}
	if e, _ := h.Lookup([]byte(secret)); e.Policy.RequestsPerMinute != 5 || e.Policy.MaxConcurrent != 2 {
		t.Fatalf("policy not updated: %+v", e.Policy)
	}
	// Rotation: the old secret stops at once, the tenant stays.
	_, secret2, err := h.Rotate("ci")
	if err != nil || secret2 == secret {
		t.Fatal(err)
	}
	if _, ok := h.Lookup([]byte(secret)); ok {
		t.Fatal("the old secret still works after rotation")
	}
	if e2, ok := h.Lookup([]byte(secret2)); !ok || e2.TenantID != e.TenantID {
		t.Fatalf("rotated key changed tenant: %+v", e2)
	}
	// Revocation: effective on the next lookup.
	if _, err := h.Revoke("ci"); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.Lookup([]byte(secret2)); ok {
		t.Fatal("revoked key still works")
	}
	if got := code(second(h.Rotate("ci"))); got != "key_revoked/name" {
		t.Fatalf("rotate a revoked key: %s", got)
	}
	if f.changes.Load() != 5 { // the one in force, create, update, rotate, revoke
		t.Fatalf("the subscriber was sent %d snapshots", f.changes.Load())
	}
	_, live, _ := h.Create("live", tenantpolicy.Policy{DailyBudgetUSD: 3})
	// A restart finds everything as it was.
	f.stop()
	g := spawn(t, path)
	if _, ok := g.h.Lookup([]byte(secret2)); ok {
		t.Fatal("revoked key works after a restart")
	}
	if e, ok := g.h.Lookup([]byte(live)); !ok || e.Policy.DailyBudgetUSD != 3 {
		t.Fatalf("live key after a restart: %+v %v", e, ok)
	}
	if i, ok := g.h.Snapshot().Info("ci"); !ok || i.RevokedAt == nil || i.RotatedAt == nil || i.CreatedAt == nil || i.Policy.MaxConcurrent != 2 {
		t.Fatalf("ci after a restart: %+v", i)
	}
}

func TestRestartReloadsFromTheStore(t *testing.T) {
	f := spawn(t, filepath.Join(t.TempDir(), sqlite.FileName))
	_, s1, _ := f.h.Create("a", tenantpolicy.Policy{})
	f.h.root.Send(f.h.pid, messages.Crash{Reason: "test"})
	// The fresh actor reloaded "a" from the store: its name is taken, and
	// new keys work.
	if got := code(second(f.h.Create("a", tenantpolicy.Policy{}))); got != "duplicate_key_name/name" {
		t.Fatalf("after restart: %s", got)
	}
	_, s2, err := f.h.Create("b", tenantpolicy.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{s1, s2} {
		if _, ok := f.h.Lookup([]byte(s)); !ok {
			t.Fatal("key lost in the restart")
		}
	}
}

func first(_ keys.Info, err error) error { return err }

func second[T any](_ keys.Info, _ T, err error) error { return err }

// TestSetConfigKeepsRunTimeKeys: a config reload replaces the config-file
// tenants in one step (the old one's key stops working, the new one's
// works, the subscriber is sent it), keeps the keys issued at run time, refuses a
// config tenant named like a stored key without changing anything, and a
// restarted actor rebuilds from the new config, not the start-up one.
func TestSetConfigKeepsRunTimeKeys(t *testing.T) {
	f := spawn(t, filepath.Join(t.TempDir(), sqlite.FileName))
	_, secret, err := f.h.Create("runner", tenantpolicy.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	before := f.changes.Load()
	dev := ConfigTenant{Name: "dev", KeySHA256: sha256.Sum256([]byte("dev-key"))}
	if err := f.h.SetConfig([]ConfigTenant{dev}); err != nil {
		t.Fatal(err)
	}
	if f.changes.Load() != before+1 {
		t.Fatal("SetConfig did not publish")
	}
	check := func(when string) {
		t.Helper()
		if _, ok := f.h.Lookup([]byte("ops-key")); ok {
			t.Fatalf("%s: the removed config tenant still authenticates", when)
		}
		for _, k := range []string{"dev-key", secret} {
			if _, ok := f.h.Lookup([]byte(k)); !ok {
				t.Fatalf("%s: key %.8s… lost", when, k)
			}
		}
	}
	check("after SetConfig")
	if err := f.h.SetConfig([]ConfigTenant{dev, {Name: "runner", KeySHA256: sha256.Sum256([]byte("x"))}}); err == nil || !strings.Contains(err.Error(), "runner") {
		t.Fatalf("a config tenant named like a stored key: %v", err)
	}
	if err := f.h.SetConfig([]ConfigTenant{dev, dev}); err == nil {
		t.Fatal("a tenant listed twice was accepted")
	}
	check("after the refused changes")
	f.h.root.Send(f.h.pid, messages.Crash{Reason: "test"})
	if got := code(second(f.h.Create("dev", tenantpolicy.Policy{}))); got != "duplicate_key_name/name" {
		t.Fatalf("after a restart, dev is not a config tenant: %s", got)
	}
	check("after a restart")
}

// TestReloadSeesAnotherWriter: two actors share one store, as two cluster
// nodes share etcd. A key the first creates works on the second after a
// Reload (and not before: the second serves its published snapshot); a
// Reload that finds nothing new publishes nothing; and an operation on a
// key the second has not loaded yet reads the store instead of answering
// 404.
func TestReloadSeesAnotherWriter(t *testing.T) {
	a := spawn(t, filepath.Join(t.TempDir(), sqlite.FileName))
	b := &fixture{db: a.db, sys: a.sys}
	hb, err := Spawn(b.sys, Options{Store: a.db, Resolver: resolver})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hb.Stop)
	countPublications(t, b.sys, hb, &b.changes)
	_, secret, err := a.h.Create("shared", tenantpolicy.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := hb.Lookup([]byte(secret)); ok {
		t.Fatal("the second actor saw the key without reloading: the test proves nothing")
	}
	before := b.changes.Load()
	hb.Reload()
	waitLookup(t, hb, secret, true)
	// The subscriber is sent the snapshot just after it is stored, so a
	// lookup can see the key a moment before the count moves; the exact count is checked
	// after the ask below, which the actor answers only when done.
	waitCount(t, &b.changes, before+1)
	hb.Reload()
	hb.Reload()
	// An ask is answered after the reloads sent before it.
	if _, _, err := hb.Create("probe", tenantpolicy.Policy{}); err != nil {
		t.Fatal(err)
	}
	if got := b.changes.Load(); got != before+2 { // the reload that found it, the create
		t.Fatalf("reloads that found nothing new published: %d publications, want 2", got-before)
	}
	// "late" is created by a and revoked through b before b reloads.
	_, late, err := a.h.Create("late", tenantpolicy.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hb.Revoke("late"); err != nil {
		t.Fatalf("revoking a key the actor had not loaded yet: %v", err)
	}
	a.h.Reload()
	waitLookup(t, a.h, late, false)
}

func waitLookup(t *testing.T, h *Handle, secret string, want bool) {
	t.Helper()
	testutil.Until(t, fmt.Sprintf("lookup %v", want), func() bool {
		_, ok := h.Lookup([]byte(secret))
		return ok == want
	})
}

// waitCount waits until n reaches want (a subscriber takes a publication
// on its own goroutine, after the actor sent it).
func waitCount(t *testing.T, n *atomic.Int64, want int64) {
	t.Helper()
	testutil.Until(t, fmt.Sprintf("%d publications", want), func() bool { return n.Load() >= want })
}

// hangingStore is a store that stops answering (an unreachable etcd):
// every call waits for its context.
type hangingStore struct {
	*sqlite.DB
	hang atomic.Bool
}

func (s *hangingStore) wait(ctx context.Context) error {
	if !s.hang.Load() {
		return nil
	}
	<-ctx.Done()
	return fmt.Errorf("etcd did not answer: %w", ctx.Err())
}

func (s *hangingStore) CreateKey(ctx context.Context, k store.Key) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	return s.DB.CreateKey(ctx, k)
}

func (s *hangingStore) Keys(ctx context.Context) ([]store.Key, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.DB.Keys(ctx)
}

func (s *hangingStore) RevokeKey(ctx context.Context, name string, at time.Time) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	return s.DB.RevokeKey(ctx, name, at)
}

// boundStore records how long each Keys call was given.
type boundStore struct {
	*sqlite.DB
	mu     sync.Mutex
	bounds []time.Duration
}

func (s *boundStore) Keys(ctx context.Context) ([]store.Key, error) {
	if d, ok := ctx.Deadline(); ok {
		s.mu.Lock()
		s.bounds = append(s.bounds, time.Until(d))
		s.mu.Unlock()
	}
	return s.DB.Keys(ctx)
}

// TestStartupReadHasTheWholeTimeout: the read at start-up, which no caller
// waits on, may take the whole timeout (a loaded machine's slow first read
// stopped start-up at a third of it); the actor's own reads keep the third.
func TestStartupReadHasTheWholeTimeout(t *testing.T) {
	st := &boundStore{DB: sqlitetest.Open(t)}
	h := spawnOn(t, st, time.Hour)
	// A reload is the actor's own read; a create asked after it is
	// answered once it is done.
	h.Reload()
	if _, _, err := h.Create("k", tenantpolicy.Policy{}); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	// Minutes of slack either way: no timing is measured here.
	if len(st.bounds) < 2 || st.bounds[0] < 50*time.Minute || st.bounds[1] > 20*time.Minute || st.bounds[1] < 10*time.Minute {
		t.Fatalf("read bounds %v; want the hour at start-up, then a third of it", st.bounds)
	}
}

// TestUnreachableStoreAnswers503: while the store does not answer, keys
// already published keep authenticating, and a management call is
// answered 503 key_store_unavailable, with the store's error, by the
// store call's own bound (a third of the timeout), not by the ask's
// timeout, even behind a queued Reload that spends one bound itself.
func TestUnreachableStoreAnswers503(t *testing.T) {
	st := &hangingStore{DB: sqlitetest.Open(t)}
	h := spawnOn(t, st, 3*time.Second)
	_, secret, err := h.Create("before", tenantpolicy.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	st.hang.Store(true)
	h.Reload()
	for _, op := range []struct {
		name string
		call func() error
	}{
		{"create", func() error { return second(h.Create("during", tenantpolicy.Policy{})) }},
		{"revoke", func() error { return first(h.Revoke("before")) }},
	} {
		start := time.Now()
		err := op.call()
		var e *keys.Error
		if !errors.As(err, &e) || e.Status != 503 || e.Code != "key_store_unavailable" || !strings.Contains(e.Message, "etcd did not answer") {
			t.Fatalf("%s with the store hanging: %v", op.name, err)
		}
		t.Logf("%s answered in %v: %s", op.name, time.Since(start).Round(time.Millisecond), e.Message)
	}
	if _, ok := h.Lookup([]byte(secret)); !ok {
		t.Fatal("a published key stopped working while the store was unreachable")
	}
	st.hang.Store(false)
	if _, err := h.Revoke("before"); err != nil {
		t.Fatalf("after the store came back: %v", err)
	}
	if _, ok := h.Lookup([]byte(secret)); ok {
		t.Fatal("revoked key still works")
	}
}

// TestRestartPublishesWhatTheStoreGained: a key another writer added to
// the store (another node, in cluster mode) while this actor had not
// reloaded is published by the restarted actor's own load, not only held
// in its list: the snapshot and the actor's list never disagree.
func TestRestartPublishesWhatTheStoreGained(t *testing.T) {
	f := spawn(t, filepath.Join(t.TempDir(), sqlite.FileName))
	secret := keys.SecretPrefix + "written-by-another-node-0123456789"
	d := keys.Digest([]byte(secret))
	if err := f.db.CreateKey(context.Background(), store.Key{Name: "other", TenantID: resolver.IDForDigest(d).String(), KeyHash: keys.HashHex(d),
		CreatedAt: time.Date(2026, 3, 14, 10, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.h.Lookup([]byte(secret)); ok {
		t.Fatal("the key works before any reload: the test proves nothing")
	}
	before := f.changes.Load()
	f.h.root.Send(f.h.pid, messages.Crash{Reason: "test"})
	waitLookup(t, f.h, secret, true)
	// The snapshot is stored before it is sent to the subscribers, so the
	// counter may not have taken the restart's publication yet when the
	// key already works: wait for it, then count from there.
	waitCount(t, &f.changes, before+1)
	// And a Reload afterwards finds nothing new to publish.
	before++
	f.h.Reload()
	if _, _, err := f.h.Create("after", tenantpolicy.Policy{}); err != nil {
		t.Fatal(err)
	}
	if got := f.changes.Load() - before; got != 1 {
		t.Fatalf("%d publications for one create after a reload that found nothing", got)
	}
}

// counter is a subscriber that counts the snapshots it is sent.
type counter struct{ n *atomic.Int64 }

func (c counter) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.Published[*keys.Snapshot]:
		c.n.Add(1)
	case *messages.Sync:
		ctx.Respond(m)
	}
}

// countPublications subscribes a counter of h's publications into n
// (the snapshot in force counts one); operations return once it took
// theirs.
func countPublications(t *testing.T, sys *actor.ActorSystem, h *Handle, n *atomic.Int64) {
	t.Helper()
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return counter{n: n} }))
	t.Cleanup(func() { _ = sys.Root.PoisonFuture(pid).Wait() })
	if err := h.Subscribe(pid); err != nil {
		t.Fatal(err)
	}
	if _, err := sys.Root.RequestFuture(pid, &messages.Sync{}, 10*time.Second).Result(); err != nil {
		t.Fatal(err) // the snapshot in force is counted from here
	}
}

// recorder is a subscriber: it keeps every snapshot it is sent, in order,
// and answers the barrier.
type recorder struct {
	got  chan *keys.Snapshot
	last atomic.Pointer[keys.Snapshot]
}

func (r *recorder) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.Published[*keys.Snapshot]:
		r.last.Store(m.Snapshot)
		r.got <- m.Snapshot
	case *messages.Sync:
		ctx.Respond(m)
	}
}

// TestSubscriberTakesEverySnapshotBeforeTheAnswer: a subscriber is sent
// the snapshot in force, then every one published, in order; an operation
// returns only once the subscriber took the snapshot it made (so the
// limiter, a subscriber, limits a new key on the very next request).
func TestSubscriberTakesEverySnapshotBeforeTheAnswer(t *testing.T) {
	f := spawn(t, filepath.Join(t.TempDir(), sqlite.FileName))
	r := &recorder{got: make(chan *keys.Snapshot, 16)}
	pid := f.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return r }))
	t.Cleanup(func() { _ = f.sys.Root.PoisonFuture(pid).Wait() })
	if err := f.h.Subscribe(pid); err != nil {
		t.Fatal(err)
	}
	if s := <-r.got; s != f.h.Snapshot() {
		t.Fatal("the first snapshot sent is not the one in force")
	}
	for i, name := range []string{"a", "b", "c"} {
		if _, _, err := f.h.Create(name, tenantpolicy.Policy{DailyBudgetUSD: 1}); err != nil {
			t.Fatal(err)
		}
		if s := r.last.Load(); s != f.h.Snapshot() || len(s.Active()) != i+2 { // the config tenant and the keys so far
			t.Fatalf("after creating %s the subscriber has %d active keys", name, len(s.Active()))
		}
		if s := <-r.got; len(s.Active()) != i+2 {
			t.Fatalf("snapshot %d out of order: %d active keys", i, len(s.Active()))
		}
	}
	if _, err := f.h.Revoke("a"); err != nil {
		t.Fatal(err)
	}
	if s := r.last.Load(); len(s.Active()) != 3 {
		t.Fatalf("after the revocation the subscriber has %d active keys", len(s.Active()))
	}
}
