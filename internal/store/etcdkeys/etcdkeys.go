// Package etcdkeys is a store.KeyStore in etcd, so that every node of a
// cluster (docs/cluster.md) reads and writes the same API keys: a key
// created or revoked on one node is in force on all of them within about a
// second, through Watch.
//
// Why etcd, and not the SQLite store replicated through a grain: etcd is
// already the store every member reaches (membership, budget records); its
// transactions make "create if absent" and "change if nobody changed it
// since I read it" exact across nodes; its watch tells every node of a
// change at once. A grain's state lives in one process's memory and is
// lost when its member dies, so it could not be the keys' state of record.
//
// Layout: one etcd key per API key, <Prefix(cluster)><name>, whose value
// is the JSON of store.Key (record). Every operation is one etcd
// transaction, or a read followed by one transaction guarded by the key's
// ModRevision and retried when another node changed it in between, so two
// nodes racing never lose or corrupt a change: exactly one create of a
// name wins, and a revocation is never undone by a concurrent rotation or
// policy change.
//
// Every etcd call is bounded by Options.Timeout, so an unreachable etcd
// makes an operation fail with an error saying so, never hang.
//
// Unlike the SQLite store, the hash and the tenant id are not checked for
// uniqueness across keys: both derive from a fresh 256-bit random secret,
// so a collision is not a case to handle.
package etcdkeys

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/omniroute/gateway/internal/store"
	"github.com/omniroute/gateway/internal/tenantpolicy"
)

// Prefix is where a cluster's keys live: /omniroute/keys/<cluster>/.
func Prefix(cluster string) string { return "/omniroute/keys/" + cluster + "/" }

// Options configure New.
type Options struct {
	// Timeout bounds one operation, its retries included (default 3 s).
	Timeout time.Duration
	// Probe is how often Watch checks that etcd answers, to notice an
	// outage's end and reload (default 1 s).
	Probe time.Duration
	// Retry is how long Watch waits after a failed attempt to establish a
	// watch before the next one (default 1 s).
	Retry time.Duration
	// Log receives the watch's breaks and recoveries (default: discarded).
	Log *slog.Logger
}

// Store is the etcd key store. It is safe for concurrent use.
type Store struct {
	c      *clientv3.Client
	prefix string
	o      Options
	// watching is whether Watch holds a live watch (health shows it).
	watching atomic.Bool
	// beforeWrite, when set (tests), runs between change's read and its
	// guarded write: the window another node's write can fall into.
	beforeWrite func()
}

// New stores cluster's keys through c, which the caller owns (and closes
// after every Watch has returned).
func New(c *clientv3.Client, cluster string, o Options) *Store {
	if o.Timeout <= 0 {
		o.Timeout = 3 * time.Second
	}
	if o.Probe <= 0 {
		o.Probe = time.Second
	}
	if o.Retry <= 0 {
		o.Retry = time.Second
	}
	o.Log = cmp.Or(o.Log, slog.New(slog.DiscardHandler))
	return &Store{c: c, prefix: Prefix(cluster), o: o}
}

var _ store.KeyStore = (*Store)(nil)

// record is a key as stored: explicit JSON names, so the format does not
// follow Go field names, and times in RFC 3339 (UTC) or absent.
type record struct {
	Name      string          `json:"name"`
	TenantID  string          `json:"tenantId"`
	KeyHash   string          `json:"keyHash"`
	Policy    json.RawMessage `json:"policy"`
	CreatedAt time.Time       `json:"createdAt"`
	RotatedAt *time.Time      `json:"rotatedAt,omitempty"`
	RevokedAt *time.Time      `json:"revokedAt,omitempty"`
}

func encode(k store.Key) (string, error) {
	pol, err := json.Marshal(k.Policy)
	if err != nil {
		return "", fmt.Errorf("encoding the policy of key %q: %w", k.Name, err)
	}
	r := record{Name: k.Name, TenantID: k.TenantID, KeyHash: k.KeyHash, Policy: pol, CreatedAt: k.CreatedAt.UTC(),
		RotatedAt: optTime(k.RotatedAt), RevokedAt: optTime(k.RevokedAt)}
	b, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("encoding key %q: %w", k.Name, err)
	}
	return string(b), nil
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func (s *Store) decode(etcdKey string, v []byte) (store.Key, error) {
	var r record
	if err := json.Unmarshal(v, &r); err != nil {
		return store.Key{}, fmt.Errorf("etcd key %s does not hold a key record (%v); delete it or restore it from a backup", etcdKey, err)
	}
	if want := strings.TrimPrefix(etcdKey, s.prefix); r.Name != want {
		return store.Key{}, fmt.Errorf("etcd key %s holds the record of key %q; put each record under its own name", etcdKey, r.Name)
	}
	p, err := tenantpolicy.Decode(r.Policy)
	if err != nil {
		return store.Key{}, fmt.Errorf("etcd key %s: key %q has an invalid policy (%v); fix it with the key API", etcdKey, r.Name, err)
	}
	k := store.Key{Name: r.Name, TenantID: r.TenantID, KeyHash: r.KeyHash, Policy: p, CreatedAt: r.CreatedAt.UTC()}
	if r.RotatedAt != nil {
		k.RotatedAt = r.RotatedAt.UTC()
	}
	if r.RevokedAt != nil {
		k.RevokedAt = r.RevokedAt.UTC()
	}
	return k, nil
}

// ErrUnavailable is wrapped by every error that comes from etcd itself
// (not answering in time, no leader, refused), as opposed to a key's
// state (store.ErrNotFound, ...).
var ErrUnavailable = errors.New("etcd is unavailable")

// unavailable describes an etcd failure: what failed and what to do.
func (s *Store) unavailable(op string, err error) error {
	return fmt.Errorf("%w: %s in etcd failed within %v (%v); check that etcd is running and reachable at OMNIROUTE_CLUSTER_ETCD_ENDPOINTS, then retry",
		ErrUnavailable, op, s.o.Timeout, err)
}

// CreateKey implements store.KeyStore: one transaction that puts the key
// only if its name was never stored (revoked keys keep their names).
func (s *Store) CreateKey(ctx context.Context, k store.Key) error {
	v, err := encode(k)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	key := s.prefix + k.Name
	resp, err := s.c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).Then(clientv3.OpPut(key, v)).Commit()
	if err != nil {
		return s.unavailable(fmt.Sprintf("creating key %q", k.Name), err)
	}
	if !resp.Succeeded {
		return store.ErrDuplicateName
	}
	return nil
}

// Keys implements store.KeyStore: every key under the prefix, by name
// (etcd returns them in key order, which is name order).
func (s *Store) Keys(ctx context.Context) ([]store.Key, error) {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	resp, err := s.c.Get(ctx, s.prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, s.unavailable("reading the keys", err)
	}
	out := make([]store.Key, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		k, err := s.decode(string(kv.Key), kv.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, nil
}

// Get returns one key (ok false when the name was never stored).
func (s *Store) Get(ctx context.Context, name string) (k store.Key, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	k, _, ok, err = s.get(ctx, name)
	return k, ok, err
}

func (s *Store) get(ctx context.Context, name string) (store.Key, int64, bool, error) {
	key := s.prefix + name
	resp, err := s.c.Get(ctx, key)
	if err != nil {
		return store.Key{}, 0, false, s.unavailable(fmt.Sprintf("reading key %q", name), err)
	}
	if len(resp.Kvs) == 0 {
		return store.Key{}, 0, false, nil
	}
	k, err := s.decode(key, resp.Kvs[0].Value)
	return k, resp.Kvs[0].ModRevision, true, err
}

// change applies mutate to an active key: read it, refuse a missing or
// revoked one, and write it back only if nobody wrote it since the read
// (its ModRevision is unchanged); otherwise read again. A concurrent
// revocation therefore always wins over a policy change or a rotation:
// the loser re-reads, sees it revoked and answers store.ErrRevoked.
func (s *Store) change(ctx context.Context, name string, mutate func(*store.Key)) error {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	key := s.prefix + name
	for {
		k, rev, ok, err := s.get(ctx, name)
		switch {
		case err != nil:
			return err
		case !ok:
			return store.ErrNotFound
		case k.Revoked():
			return store.ErrRevoked
		}
		mutate(&k)
		v, err := encode(k)
		if err != nil {
			return err
		}
		if s.beforeWrite != nil {
			s.beforeWrite()
		}
		resp, err := s.c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).Then(clientv3.OpPut(key, v)).Commit()
		if err != nil {
			return s.unavailable(fmt.Sprintf("changing key %q", name), err)
		}
		if resp.Succeeded {
			return nil
		}
		// Another node wrote the key between the read and the write.
	}
}

// UpdatePolicy implements store.KeyStore.
func (s *Store) UpdatePolicy(ctx context.Context, name string, p tenantpolicy.Policy) error {
	return s.change(ctx, name, func(k *store.Key) { k.Policy = p })
}

// RotateKey implements store.KeyStore.
func (s *Store) RotateKey(ctx context.Context, name, keyHash string, at time.Time) error {
	return s.change(ctx, name, func(k *store.Key) { k.KeyHash, k.RotatedAt = keyHash, at.UTC() })
}

// RevokeKey implements store.KeyStore.
func (s *Store) RevokeKey(ctx context.Context, name string, at time.Time) error {
	if at.IsZero() {
		at = time.Unix(0, 1) // a zero time would read as "active"
	}
	return s.change(ctx, name, func(k *store.Key) { k.RevokedAt = at.UTC() })
}

// Watch calls onChange whenever a key under the prefix changes, until ctx
// ends; it returns then. It also calls onChange each time it
// (re-)establishes its watch, the first time included: changes made while
// it was not watching (etcd down, this node cut off) are then picked up by
// the caller's reload. It re-establishes the watch when etcd cancels it
// (compaction, lost leader) and when its probe, one small read every
// Options.Probe, finds etcd answering again after failing. onChange must
// not block; it may be called when nothing changed.
func (s *Store) Watch(ctx context.Context, onChange func()) {
	broken := false
	for ctx.Err() == nil {
		rev, err := s.revision(ctx)
		if err != nil {
			if !broken {
				s.o.Log.Warn("cannot watch the API keys in etcd; keys keep working as last loaded, changes on other nodes are not seen until etcd answers", "err", err)
				broken = true
			}
			sleep(ctx, s.o.Retry)
			continue
		}
		if broken {
			s.o.Log.Info("watching the API keys in etcd again; reloading them")
			broken = false
		}
		s.watching.Store(true)
		onChange()
		why := s.watchFrom(ctx, rev+1, onChange)
		s.watching.Store(false)
		if ctx.Err() == nil {
			s.o.Log.Warn("the watch of the API keys in etcd broke; re-establishing it", "why", why)
			broken = true
		}
	}
}

// Watching reports whether Watch holds a watch that etcd answers: false
// before it is established, while etcd does not answer and after Watch
// returned. While it is false, changes made on other nodes are not seen
// here (the keys last loaded stay in force).
func (s *Store) Watching() bool { return s.watching.Load() }

// revision reads the store's current revision (a count-only read of the
// prefix): the watch starts after it.
func (s *Store) revision(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	resp, err := s.c.Get(ctx, s.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, s.unavailable("reading the keys' revision", err)
	}
	return resp.Header.Revision, nil
}

// watchFrom watches the prefix from rev and calls onChange once per watch
// response with events, until ctx ends, the watch breaks or the probe sees
// etcd come back after an outage. It says why it returned.
func (s *Store) watchFrom(ctx context.Context, rev int64, onChange func()) string {
	// WithRequireLeader: a member that lost its leader cancels the watch
	// instead of holding it silently.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := s.c.Watch(wctx, s.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev))
	probe := time.NewTicker(s.o.Probe)
	defer probe.Stop()
	down := false
	for {
		select {
		case <-ctx.Done():
			return "stopped"
		case resp, ok := <-wch:
			switch {
			case !ok:
				return "the watch channel closed"
			case resp.Err() != nil:
				return resp.Err().Error()
			case resp.Canceled:
				return "etcd cancelled the watch"
			case len(resp.Events) > 0:
				onChange()
			}
		case <-probe.C:
			_, err := s.revision(ctx)
			switch {
			case err != nil && !down:
				down = true
				s.watching.Store(false)
				s.o.Log.Warn("etcd does not answer; keys keep working as last loaded", "err", err)
			case err == nil && down:
				return "etcd answers again after an outage"
			}
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Migration counts what Migrate did.
type Migration struct {
	Copied    int // absent from etcd, copied
	Present   int // already in etcd with the same hash
	Conflicts int // in etcd with another hash, or active there and revoked here: left as etcd has it
}

// Migrate copies the keys a node kept in its own store before it joined a
// cluster into etcd, create-if-absent, so they keep working on every
// node. A name etcd already holds is never overwritten: etcd is the
// cluster's state of record, and another node may have issued that name,
// rotated or revoked it since. When the two disagree in a way an operator
// should know (another hash: two different keys share the name; or the
// key revoked here but active in etcd), Migrate logs a warning with the
// name and the hashes' first 8 hex digits, never a secret. It stops at
// the first etcd failure.
func (s *Store) Migrate(ctx context.Context, local []store.Key, log *slog.Logger) (Migration, error) {
	var m Migration
	for _, k := range local {
		err := s.CreateKey(ctx, k)
		if err == nil {
			m.Copied++
			continue
		}
		if !errors.Is(err, store.ErrDuplicateName) {
			return m, fmt.Errorf("copying the node's key %q to etcd: %w", k.Name, err)
		}
		have, ok, err := s.Get(ctx, k.Name)
		if err != nil || !ok {
			return m, fmt.Errorf("copying the node's key %q to etcd: reading etcd's: %v", k.Name, err)
		}
		switch {
		case have.KeyHash != k.KeyHash:
			m.Conflicts++
			log.Warn("a key in this node's database has the name of a different key in the cluster; the cluster's is kept and this node's does not work in cluster mode: create it again under another name if it is still needed",
				"key", k.Name, "localHash", prefix8(k.KeyHash), "clusterHash", prefix8(have.KeyHash))
		case k.Revoked() && !have.Revoked():
			m.Conflicts++
			log.Warn("a key revoked in this node's database is active in the cluster; revoke it through the key API if it should stay revoked",
				"key", k.Name, "hash", prefix8(k.KeyHash))
		default:
			m.Present++
		}
	}
	return m, nil
}

func prefix8(h string) string { return h[:min(8, len(h))] }
