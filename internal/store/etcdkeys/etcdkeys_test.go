package etcdkeys

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/omniroute/gateway/internal/store"
	"github.com/omniroute/gateway/internal/tenantpolicy"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/internal/testutil/etcdtest"
)

// client is one node's etcd client, closed when the test ends (before
// the server, which was started first).
func client(t *testing.T, addr string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// node is one node's store on its own client.
func node(t *testing.T, srv *etcdtest.Server, o Options) *Store {
	return New(client(t, srv.Addr()), "test", o)
}

var t0 = time.Date(2026, 3, 14, 10, 0, 0, 123456789, time.UTC)

func key(name, hash string) store.Key {
	return store.Key{Name: name, TenantID: "key_" + strings.Repeat("0", 16), KeyHash: hash, CreatedAt: t0,
		Policy: tenantpolicy.Policy{RequestsPerMinute: 60, AllowedModels: []string{"gpt-*"}}}
}

func hash(c byte) string { return strings.Repeat(string(c), 64) }

// TestOperations: every operation and every error, in one store.
func TestOperations(t *testing.T) {
	s := node(t, etcdtest.Start(t), Options{})
	ctx := context.Background()
	if ks, err := s.Keys(ctx); err != nil || len(ks) != 0 {
		t.Fatalf("empty store: %v %v", ks, err)
	}
	for _, n := range []string{"b", "a", "c"} {
		if err := s.CreateKey(ctx, key(n, hash(n[0]))); err != nil {
			t.Fatalf("create %s: %v", n, err)
		}
	}
	at := t0.Add(time.Hour)
	pol := tenantpolicy.Policy{MaxConcurrent: 3, Class: "batch"}
	steps := []struct {
		name string
		err  error
		want error
	}{
		{"create a taken name", s.CreateKey(ctx, key("a", hash('z'))), store.ErrDuplicateName},
		{"update a's policy", s.UpdatePolicy(ctx, "a", pol), nil},
		{"rotate b", s.RotateKey(ctx, "b", hash('B'), at), nil},
		{"revoke c", s.RevokeKey(ctx, "c", at), nil},
		{"create revoked c's name again", s.CreateKey(ctx, key("c", hash('y'))), store.ErrDuplicateName},
		{"update revoked c", s.UpdatePolicy(ctx, "c", pol), store.ErrRevoked},
		{"rotate revoked c", s.RotateKey(ctx, "c", hash('C'), at), store.ErrRevoked},
		{"revoke revoked c", s.RevokeKey(ctx, "c", at), store.ErrRevoked},
		{"update a missing key", s.UpdatePolicy(ctx, "nope", pol), store.ErrNotFound},
		{"rotate a missing key", s.RotateKey(ctx, "nope", hash('n'), at), store.ErrNotFound},
		{"revoke a missing key", s.RevokeKey(ctx, "nope", at), store.ErrNotFound},
	}
	for _, c := range steps {
		if !errors.Is(c.err, c.want) || (c.want == nil) != (c.err == nil) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	ks, err := s.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ks) != 3 || ks[0].Name != "a" || ks[1].Name != "b" || ks[2].Name != "c" {
		t.Fatalf("listing is not every key by name: %+v", ks)
	}
	a, b, c := ks[0], ks[1], ks[2]
	want := key("a", hash('a'))
	want.Policy = pol
	if fmt.Sprint(a) != fmt.Sprint(want) {
		t.Errorf("a after its policy change:\n got %+v\nwant %+v", a, want)
	}
	if b.KeyHash != hash('B') || !b.RotatedAt.Equal(at) || b.Revoked() || b.Policy.RequestsPerMinute != 60 || b.TenantID != want.TenantID {
		t.Errorf("b after rotation: %+v", b)
	}
	if !c.RevokedAt.Equal(at) || c.KeyHash != hash('c') || !c.CreatedAt.Equal(t0) {
		t.Errorf("c after revocation: %+v", c)
	}
	if k, ok, err := s.Get(ctx, "b"); err != nil || !ok || k.KeyHash != hash('B') {
		t.Errorf("get b: %+v %v %v", k, ok, err)
	}
	if _, ok, err := s.Get(ctx, "nope"); err != nil || ok {
		t.Errorf("get a missing key: %v %v", ok, err)
	}
}

// TestRecordsAreChecked: a value that is not a key record, or a record
// under another name, is an error naming the etcd key, not a silently
// dropped or renamed key; clusters sharing one etcd do not see each
// other's keys.
func TestRecordsAreChecked(t *testing.T) {
	srv := etcdtest.Start(t)
	c := client(t, srv.Addr())
	s, other := New(c, "test", Options{}), New(c, "other", Options{})
	ctx := context.Background()
	if err := other.CreateKey(ctx, key("theirs", hash('t'))); err != nil {
		t.Fatal(err)
	}
	if ks, err := s.Keys(ctx); err != nil || len(ks) != 0 {
		t.Fatalf("another cluster's key is listed: %v %v", ks, err)
	}
	good, _ := encode(key("good", hash('g')))
	bad, _ := encode(key("badpolicy", hash('b')))
	for _, c2 := range []struct{ etcdKey, value, want string }{
		{Prefix("test") + "junk", "not json", "/omniroute/keys/test/junk does not hold a key record"},
		{Prefix("test") + "moved", good, `holds the record of key "good"`},
		{Prefix("test") + "badpolicy", strings.Replace(bad, `"policy":{`, `"policy":{"bogus":1,`, 1), "invalid policy"},
	} {
		if _, err := c.Put(ctx, c2.etcdKey, c2.value); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Keys(ctx); err == nil || !strings.Contains(err.Error(), c2.want) {
			t.Errorf("%s: %v, want an error with %q", c2.etcdKey, err, c2.want)
		}
		if _, err := c.Delete(ctx, c2.etcdKey); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConcurrentCreateOneWins: two nodes (two clients), several callers
// each, create the same names with different hashes at once: for every
// name exactly one create succeeds, and the stored hash is the winner's.
func TestConcurrentCreateOneWins(t *testing.T) {
	srv := etcdtest.Start(t)
	nodes := []*Store{node(t, srv, Options{}), node(t, srv, Options{})}
	const names, callers = 20, 6
	var wg sync.WaitGroup
	wins := make([][]int, names)
	var mu sync.Mutex
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			s := nodes[i%2]
			for n := 0; n < names; n++ {
				err := s.CreateKey(context.Background(), key(fmt.Sprintf("k%02d", n), hash(byte('a'+i))))
				switch {
				case err == nil:
					mu.Lock()
					wins[n] = append(wins[n], i)
					mu.Unlock()
				case !errors.Is(err, store.ErrDuplicateName):
					t.Errorf("create k%02d: %v", n, err)
				}
			}
		}(i)
	}
	wg.Wait()
	ks, err := nodes[0].Keys(context.Background())
	if err != nil || len(ks) != names {
		t.Fatalf("%d keys stored, want %d: %v", len(ks), names, err)
	}
	for n, w := range wins {
		if len(w) != 1 {
			t.Fatalf("k%02d: %d creates succeeded, want exactly 1", n, len(w))
		}
		if ks[n].KeyHash != hash(byte('a'+w[0])) {
			t.Fatalf("k%02d holds %s…, not the winner's hash", n, ks[n].KeyHash[:8])
		}
	}
}

// TestRevokeWinsARaceWithAChange, deterministically: node B revokes a key
// in the window between node A's read and A's write of a rotation and of
// a policy change. A's write must not land (it would un-revoke the key);
// A reads again and answers ErrRevoked.
func TestRevokeWinsARaceWithAChange(t *testing.T) {
	srv := etcdtest.Start(t)
	a, b := node(t, srv, Options{}), node(t, srv, Options{})
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		change func(name string) error
	}{
		{"rotate", func(n string) error { return a.RotateKey(ctx, n, hash('R'), t0) }},
		{"policy", func(n string) error { return a.UpdatePolicy(ctx, n, tenantpolicy.Policy{MaxConcurrent: 9}) }},
	} {
		n := "race-" + c.name
		if err := a.CreateKey(ctx, key(n, hash('x'))); err != nil {
			t.Fatal(err)
		}
		var writes atomic.Int32
		a.beforeWrite = func() {
			if writes.Add(1) == 1 {
				if err := b.RevokeKey(ctx, n, t0); err != nil {
					t.Errorf("revoke on b: %v", err)
				}
			}
		}
		err := c.change(n)
		a.beforeWrite = nil
		if !errors.Is(err, store.ErrRevoked) {
			t.Errorf("%s racing a revocation: %v, want ErrRevoked", c.name, err)
		}
		k, _, err := b.Get(ctx, n)
		if err != nil || !k.Revoked() || k.KeyHash != hash('x') || k.Policy.MaxConcurrent != 0 {
			t.Errorf("%s racing a revocation left %+v (%v)", c.name, k, err)
		}
	}
}

// TestConcurrentRevokeAndChanges, with real concurrency: one node revokes
// while the other rotates and changes the policy in a loop. The key ends
// revoked every time, and exactly one revocation succeeded.
func TestConcurrentRevokeAndChanges(t *testing.T) {
	srv := etcdtest.Start(t)
	a, b := node(t, srv, Options{}), node(t, srv, Options{})
	ctx := context.Background()
	for round := 0; round < 30; round++ {
		n := fmt.Sprintf("r%02d", round)
		if err := a.CreateKey(ctx, key(n, hash('x'))); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var revoked atomic.Int32
		for _, s := range []*Store{a, b} {
			wg.Add(2)
			go func() {
				defer wg.Done()
				for i := 0; i < 5; i++ {
					err := s.RotateKey(ctx, n, hash(byte('a'+i)), t0)
					if err != nil && !errors.Is(err, store.ErrRevoked) {
						t.Errorf("rotate: %v", err)
					}
					err = s.UpdatePolicy(ctx, n, tenantpolicy.Policy{MaxConcurrent: int64(i + 1)})
					if err != nil && !errors.Is(err, store.ErrRevoked) {
						t.Errorf("policy: %v", err)
					}
				}
			}()
			go func() {
				defer wg.Done()
				switch err := s.RevokeKey(ctx, n, t0); {
				case err == nil:
					revoked.Add(1)
				case !errors.Is(err, store.ErrRevoked):
					t.Errorf("revoke: %v", err)
				}
			}()
		}
		wg.Wait()
		if k, _, err := a.Get(ctx, n); err != nil || !k.Revoked() {
			t.Fatalf("round %d: the key is not revoked after the race: %+v %v", round, k, err)
		}
		if revoked.Load() != 1 {
			t.Fatalf("round %d: %d revocations succeeded, want 1", round, revoked.Load())
		}
	}
}

// TestWatch: onChange runs when the watch is established, after a change
// another node makes, and after etcd restarts (a reload to catch up with
// what the outage hid), and the watch then sees changes again. Watch
// returns when its context ends.
func TestWatch(t *testing.T) {
	srv := etcdtest.Start(t)
	log := &testutil.SyncBuffer{}
	w := node(t, srv, Options{Timeout: 500 * time.Millisecond, Probe: 100 * time.Millisecond, Retry: 100 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(log, nil))})
	other := node(t, srv, Options{})
	calls := make(chan struct{}, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Watch(ctx, func() { calls <- struct{}{} }) }()
	defer func() { cancel(); <-done }()
	expect := func(what string) {
		t.Helper()
		testutil.Recv(t, "onChange "+what, calls)
	}
	drain := func() {
		for {
			select {
			case <-calls:
			default:
				return
			}
		}
	}
	expect("when the watch is established")
	start := time.Now()
	if err := other.CreateKey(context.Background(), key("w1", hash('1'))); err != nil {
		t.Fatal(err)
	}
	expect("after a create on another node")
	t.Logf("a create reached the watcher in %v", time.Since(start).Round(time.Microsecond))
	// A write outside the prefix (another cluster) is not a change.
	if err := New(client(t, srv.Addr()), "other", Options{}).CreateKey(context.Background(), key("x", hash('x'))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-calls:
		t.Fatal("onChange for another cluster's key")
	case <-time.After(300 * time.Millisecond):
	}
	if !w.Watching() {
		t.Fatal("Watching is false with a live watch")
	}
	srv.Stop()
	testutil.Until(t, "Watching to turn false with etcd down", func() bool { return !w.Watching() })
	drain()
	start = time.Now()
	srv.Restart(t)
	t.Logf("etcd restarted in %v", time.Since(start).Round(time.Millisecond))
	expect("after etcd restarted")
	testutil.Until(t, "Watching to turn true after etcd restarted", w.Watching)
	t.Logf("the reload after the restart came %v after it began", time.Since(start).Round(time.Millisecond))
	drain()
	if err := other.RevokeKey(context.Background(), "w1", t0); err != nil {
		t.Fatal(err)
	}
	expect("after a revocation once etcd was back")
	if s := log.String(); !strings.Contains(s, "etcd does not answer") || !strings.Contains(s, "watching the API keys in etcd again") {
		t.Errorf("the outage and the recovery are not logged:\n%s", s)
	}
	cancel()
	testutil.Recv(t, "Watch returned after its context ended", done)
	if w.Watching() {
		t.Fatal("Watching is true after Watch returned")
	}
}

// TestUnavailable: with etcd stopped, every operation fails within its
// timeout (plus scheduling slack) with ErrUnavailable and a message that
// says what to do; none hangs.
func TestUnavailable(t *testing.T) {
	srv := etcdtest.Start(t)
	const timeout = 500 * time.Millisecond
	s := node(t, srv, Options{Timeout: timeout})
	ctx := context.Background()
	if err := s.CreateKey(ctx, key("k", hash('k'))); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"create", func() error { return s.CreateKey(ctx, key("n", hash('n'))) }},
		{"list", func() error { _, err := s.Keys(ctx); return err }},
		{"get", func() error { _, _, err := s.Get(ctx, "k"); return err }},
		{"policy", func() error { return s.UpdatePolicy(ctx, "k", tenantpolicy.Policy{}) }},
		{"rotate", func() error { return s.RotateKey(ctx, "k", hash('r'), t0) }},
		{"revoke", func() error { return s.RevokeKey(ctx, "k", t0) }},
	} {
		start := time.Now()
		err := c.call()
		took := time.Since(start)
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "OMNIROUTE_CLUSTER_ETCD_ENDPOINTS") {
			t.Errorf("%s with etcd down: %v", c.name, err)
		}
		if took > timeout+2*time.Second {
			t.Errorf("%s with etcd down took %v; the bound is %v", c.name, took, timeout)
		}
	}
}

// TestMigrate: a node's own keys are copied into etcd when absent; a name
// etcd holds is never overwritten, and a disagreement an operator should
// know of is logged by name and hash prefix only; a second run copies
// nothing.
func TestMigrate(t *testing.T) {
	s := node(t, etcdtest.Start(t), Options{})
	ctx := context.Background()
	revoked := key("was-revoked-here", hash('r'))
	revoked.RevokedAt = t0
	for _, k := range []store.Key{key("same", hash('s')), key("clash", hash('c')), key("was-revoked-here", hash('r'))} {
		if err := s.CreateKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	local := []store.Key{key("new", hash('n')), key("same", hash('s')), key("clash", hash('d')), revoked}
	log := &testutil.SyncBuffer{}
	m, err := s.Migrate(ctx, local, slog.New(slog.NewTextHandler(log, nil)))
	if err != nil || m != (Migration{Copied: 1, Present: 1, Conflicts: 2}) {
		t.Fatalf("migration: %+v %v", m, err)
	}
	ks, _ := s.Keys(ctx)
	got := map[string]store.Key{}
	for _, k := range ks {
		got[k.Name] = k
	}
	if got["new"].KeyHash != hash('n') || got["clash"].KeyHash != hash('c') || !got["was-revoked-here"].RevokedAt.IsZero() {
		t.Fatalf("after the migration: %+v", ks)
	}
	out := log.String()
	for _, want := range []string{"key=clash localHash=dddddddd clusterHash=cccccccc", "key=was-revoked-here hash=rrrrrrrr"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, hash('d')) || strings.Contains(out, hash('c')) {
		t.Errorf("the log has a whole hash:\n%s", out)
	}
	if m, err := s.Migrate(ctx, local[:2], slog.New(slog.DiscardHandler)); err != nil || m != (Migration{Present: 2}) {
		t.Fatalf("second migration: %+v %v", m, err)
	}
}
