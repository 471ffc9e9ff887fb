// Package keys owns the API keys issued at run time. The actor is the only
// writer: it creates, re-policies, rotates and revokes keys in the store
// and then publishes a new immutable snapshot (internal/keys.Snapshot) that
// the request path reads with one atomic load, so a revoked or rotated key
// stops working on the very next request on every connection, and no
// request sends a message to authenticate.
//
// Management operations are rare and need an answer (the new secret, or
// why not), so they are the one place that asks the actor and waits
// (RequestFuture with a timeout); the request path never does.
//
// Config-file tenants are part of the snapshot, read-only: operations on
// them are refused, and key names may not reuse theirs.
//
// In cluster mode the store is shared (etcd, internal/store/etcdkeys) and
// other nodes write it too: Reload tells the actor to read the store again
// and republish when something changed. The composition root calls it
// from the store's watch, so a key created, rotated or revoked on another
// node is in force here within about a second. Every store call is bounded
// by a third of Options.Timeout, so an unreachable store answers a
// management call with 503 key_store_unavailable (even behind a queued
// reload, which costs another third) instead of letting it, and the
// operations queued behind it, wait out the timeout. The read at start-up,
// which no caller waits on, has the whole timeout.
//
// The actor only publishes. What others derive from the keys (the tenant
// limiter's tenant set, admission's weights and the cluster grains'
// policies, keys.Shares) reaches them as a message: Subscribe, which
// the composition root calls, makes the actor send every snapshot it
// publishes to the subscriber, in order. A management operation returns
// once every subscriber has taken the snapshot it made (a messages.Sync
// barrier sent from the caller's goroutine), so a key created is limited
// on the very next request, and the actor never waits for a subscriber nor
// does its work (the limiter reads the tenants' spend from the store on a
// goroutine of its own).
package keys

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/apierror"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/keys"
	"github.com/omniroute/gateway/internal/store"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/internal/tenantpolicy"
	"github.com/omniroute/gateway/messages"
)

// ConfigTenant is a config-file tenant: its name, its key's SHA-256 and
// its policy.
type ConfigTenant struct {
	Name      string
	KeySHA256 [32]byte
	Policy    tenantpolicy.Policy
}

// Options configure Spawn.
type Options struct {
	Store    store.KeyStore
	Resolver *tenant.Resolver // derives tenant ids
	Config   []ConfigTenant
	Clock    clock.Clock
	// Timeout bounds one management operation (default 10s); each store
	// call the actor makes is bounded by a third of it, except the read
	// at start-up, which has all of it.
	Timeout time.Duration
	// Log receives what a Reload could not do (default: discarded).
	Log *slog.Logger
}

// Handle is what the transport holds.
type Handle struct {
	root *actor.RootContext
	pid  *actor.PID
	o    Options
	snap atomic.Pointer[keys.Snapshot]
	// cfg is the config-file tenants in force: Options.Config until a
	// reload's SetConfig; written only by the actor, read by a restarted
	// actor's load.
	cfg atomic.Pointer[[]ConfigTenant]
	// reloadPending coalesces Reload calls: set by the first, cleared by
	// the actor before it reads the store, so a change after the clear
	// sends another message and none is missed.
	reloadPending atomic.Bool
	// pub is the key list last published. Only the actor touches it (and
	// Spawn, before the actor runs); an incarnation compares what it loads
	// with it, since the object that loaded and published first is not the
	// one the actor runs as, and a restarted one starts empty.
	pub []keys.Key
	// subs are the subscribers, each sent every published snapshot.
	// Written only by the actor (copy on write), read by callers for the
	// barrier after an operation.
	subs atomic.Pointer[[]*actor.PID]
}

// Messages. Each carries its answer back through ctx.Respond.
type (
	createKey struct {
		name   string
		policy tenantpolicy.Policy
	}
	updateKey struct {
		name   string
		policy tenantpolicy.Policy
	}
	rotateKey struct{ name string }
	setConfig struct{ cfg []ConfigTenant }
	revokeKey struct{ name string }
	reload    struct{}
	subscribe struct{ pid *actor.PID }
	result    struct {
		info   keys.Info
		secret string
		err    error
	}
)

// supervisor restarts the actor after a panic from a fresh object that
// reloads the keys from the store (their state of record); the operation
// that panicked gets no answer and times out. The published snapshot keeps
// serving meanwhile.
var supervisor = actor.NewOneForOneStrategy(10, 10*time.Second, actor.DefaultDecider)

// Spawn loads the keys from the store, publishes the first snapshot and
// starts the actor. A store that cannot be read within Options.Timeout
// stops start-up: no caller waits on this read, so it gets the whole
// timeout, not the third an operation's store call gets (a loaded
// machine's slow first read is no reason to refuse to start).
func Spawn(system *actor.ActorSystem, o Options) (*Handle, error) {
	o.Clock = clock.Or(o.Clock)
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	o.Log = cmp.Or(o.Log, slog.New(slog.DiscardHandler))
	h := &Handle{root: system.Root, o: o}
	if err := uniqueNames(o.Config); err != nil {
		return nil, err
	}
	cfg := o.Config
	h.cfg.Store(&cfg)
	a := &keysActor{h: h}
	if err := a.load(o.Timeout); err != nil {
		return nil, err
	}
	a.publish()
	// The first incarnation is the one that just loaded and published;
	// a restart starts from a fresh object, which reloads on Started.
	// (Were the first one fresh too, its Started would read the store a
	// second time, later, and take in writes nobody asked it to reload.)
	var first atomic.Pointer[keysActor]
	first.Store(a)
	props := actor.PropsFromProducer(func() actor.Actor {
		if a := first.Swap(nil); a != nil {
			return a
		}
		return &keysActor{h: h}
	}, actor.WithGuardian(supervisor))
	pid, err := system.Root.SpawnNamed(props, fmt.Sprintf("keys-%p", h))
	if err != nil {
		return nil, fmt.Errorf("spawning the keys actor: %w", err)
	}
	h.pid = pid
	return h, nil
}

func uniqueNames(cfg []ConfigTenant) error {
	names := map[string]bool{}
	for _, c := range cfg {
		if names[c.Name] {
			return fmt.Errorf("config tenant %q is listed twice", c.Name)
		}
		names[c.Name] = true
	}
	return nil
}

// SetConfig replaces the config-file tenants (a config reload): the keys
// issued at run time stay as they are. It waits until the new snapshot
// is published and every subscriber has taken it, so the tenants are in
// force when it returns; a config tenant whose name a stored key uses is refused
// and nothing changes.
func (h *Handle) SetConfig(cfg []ConfigTenant) error {
	if err := uniqueNames(cfg); err != nil {
		return err
	}
	_, _, err := h.ask(&setConfig{cfg: cfg})
	return err
}

// Reload asks the actor to read the store again and republish if a key
// changed there (another node wrote it). It does not wait and never
// blocks; calls that arrive while one is pending are folded into it.
func (h *Handle) Reload() {
	if h.reloadPending.CompareAndSwap(false, true) {
		h.root.Send(h.pid, reload{})
	}
}

// Subscribe makes the actor send pid every snapshot it publishes from now
// on, as a *messages.Published[*internal/keys.Snapshot], starting with the one in
// force; snapshots arrive in the order they were published. pid must also
// answer a *messages.Sync (the barrier management operations wait on). The
// composition root calls it once the subscriber is spawned; the actor
// only sends, so a slow subscriber never holds up key management.
func (h *Handle) Subscribe(pid *actor.PID) error {
	if _, err := h.root.RequestFuture(h.pid, &subscribe{pid: pid}, h.o.Timeout).Result(); err != nil {
		return fmt.Errorf("subscribing to the keys actor: %w", err)
	}
	return nil
}

// Stop stops the actor and waits for it.
func (h *Handle) Stop() { _ = h.root.PoisonFuture(h.pid).Wait() }

// Snapshot returns the published key set.
func (h *Handle) Snapshot() *keys.Snapshot { return h.snap.Load() }

// Lookup authenticates a caller's key against the published set (config
// tenants and active keys). It does not allocate and sends no message.
func (h *Handle) Lookup(key []byte) (*keys.Entry, bool) { return h.snap.Load().Lookup(key) }

// Create issues a key and returns its description and its secret, which is
// never shown again.
func (h *Handle) Create(name string, p tenantpolicy.Policy) (keys.Info, string, error) {
	return h.ask(&createKey{name: name, policy: p})
}

// UpdatePolicy replaces a key's policy.
func (h *Handle) UpdatePolicy(name string, p tenantpolicy.Policy) (keys.Info, error) {
	i, _, err := h.ask(&updateKey{name: name, policy: p})
	return i, err
}

// Rotate gives a key a new secret (returned once); the old one stops
// working at once. The tenant id, policy and usage stay.
func (h *Handle) Rotate(name string) (keys.Info, string, error) { return h.ask(&rotateKey{name: name}) }

// Revoke stops a key from working, at once and for good.
func (h *Handle) Revoke(name string) (keys.Info, error) {
	i, _, err := h.ask(&revokeKey{name: name})
	return i, err
}

func (h *Handle) ask(m any) (keys.Info, string, error) {
	v, err := h.root.RequestFuture(h.pid, m, h.o.Timeout).Result()
	if err != nil {
		return keys.Info{}, "", keys.NewError(apierror.CodeKeyStoreUnavailable, "", fmt.Sprintf("the key store did not answer (%v); retry", err))
	}
	h.sync()
	r := v.(*result)
	return r.info, r.secret, r.err
}

// sync waits, on the caller's goroutine, until every subscriber has taken
// the snapshots published before the operation answered: the actor sent
// them before its answer, so a Sync sent now queues behind them. A
// subscriber that does not answer within the timeout (stopped, or
// restarting) is not waited for further: the operation is done in the
// store, and the snapshot reaches the subscriber when it runs again.
func (h *Handle) sync() {
	subs := h.subs.Load()
	if subs == nil {
		return
	}
	for _, pid := range *subs {
		_, _ = h.root.RequestFuture(pid, &messages.Sync{}, h.o.Timeout).Result()
	}
}

type keysActor struct {
	h *Handle
	// list is every key: config tenants first (read-only), then the store's.
	list []keys.Key
}

func (a *keysActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case messages.Crash:
		m.Panic()
	case *actor.Started:
		if a.list == nil {
			// A new incarnation (the first, or a restarted one): reload
			// the state of record, and publish it if the store changed
			// since the last publication (another node, or an operation
			// that got the store's write in before the panic). If the
			// store cannot be read, the published snapshot stays in force
			// and the next operation reports the error.
			if err := a.refresh(); err != nil {
				a.h.o.Log.Warn("the keys actor (re)started but could not read the key store; the keys last published stay in force", "err", err)
			}
		}
	case *createKey:
		ctx.Respond(a.create(m))
	case *updateKey:
		ctx.Respond(a.change(m.name, func(k *keys.Key) error {
			sctx, cancel := a.storeCtx()
			defer cancel()
			if err := a.h.o.Store.UpdatePolicy(sctx, m.name, m.policy); err != nil {
				return err
			}
			k.Policy = m.policy
			return nil
		}, false))
	case *rotateKey:
		ctx.Respond(a.change(m.name, nil, true))
	case *setConfig:
		ctx.Respond(a.setConfig(m.cfg))
	case *revokeKey:
		ctx.Respond(a.change(m.name, func(k *keys.Key) error {
			at := a.h.o.Clock.Now().UTC()
			sctx, cancel := a.storeCtx()
			defer cancel()
			if err := a.h.o.Store.RevokeKey(sctx, m.name, at); err != nil {
				return err
			}
			k.RevokedAt = &at
			return nil
		}, false))
	case *subscribe:
		var subs []*actor.PID
		if p := a.h.subs.Load(); p != nil {
			subs = append(subs, *p...)
		}
		subs = append(subs, m.pid)
		a.h.subs.Store(&subs)
		a.h.root.Send(m.pid, &messages.Published[*keys.Snapshot]{Snapshot: a.h.snap.Load()})
		ctx.Respond(&result{})
	case reload:
		a.h.reloadPending.Store(false)
		if err := a.refresh(); err != nil {
			// The published snapshot stays in force; the store's watch
			// asks again once the store answers.
			a.h.o.Log.Warn("reloading the API keys from the store failed; the keys last loaded stay in force", "err", err)
		}
	}
}

// storeCtx bounds one store call by a third of the operation timeout, so
// the caller gets the store's error (503) before its own wait ends even
// when a reload was queued in front of it, and the actor is free for the
// next message.
func (a *keysActor) storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), a.storeBound())
}

func (a *keysActor) storeBound() time.Duration { return a.h.o.Timeout / 3 }

// refresh reloads the store and publishes only if the key set differs
// from the one last published (every subscriber re-derives every
// tenant's limits and weights, which a reload that found nothing new
// should not cost).
func (a *keysActor) refresh() error {
	if err := a.load(a.storeBound()); err != nil {
		return err
	}
	if !reflect.DeepEqual(a.h.pub, a.list) {
		a.publish()
	}
	return nil
}

// load reads the store (bounded by bound) and merges the config tenants.
func (a *keysActor) load(bound time.Duration) error {
	o := a.h.o
	sctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	stored, err := o.Store.Keys(sctx)
	if err != nil {
		return fmt.Errorf("loading API keys: %w", err)
	}
	cfg := *a.h.cfg.Load()
	list := make([]keys.Key, 0, len(cfg)+len(stored))
	list = a.appendConfig(list, cfg)
	for _, s := range stored {
		k, err := fromStore(s)
		if err != nil {
			return err
		}
		list = append(list, k)
	}
	a.list = list
	return nil
}

func (a *keysActor) appendConfig(list []keys.Key, cfg []ConfigTenant) []keys.Key {
	for _, c := range cfg {
		id := a.h.o.Resolver.IDForDigest(c.KeySHA256)
		list = append(list, keys.Key{Info: keys.Info{Name: c.Name, TenantID: id.String(), Source: keys.FromConfig, Policy: c.Policy,
			KeySHA256Prefix: keys.HashHex(c.KeySHA256)[:8]}, Digest: c.KeySHA256, ID: id})
	}
	return list
}

// setConfig swaps the config tenants at the head of the list for cfg and
// keeps the stored keys behind them.
func (a *keysActor) setConfig(cfg []ConfigTenant) *result {
	list := a.appendConfig(make([]keys.Key, 0, len(cfg)+len(a.list)), cfg)
	for _, k := range a.list {
		if k.Source == keys.FromConfig {
			continue
		}
		for _, c := range cfg {
			if c.Name == k.Name {
				return &result{err: fmt.Errorf("tenants: %q is already the name of a key issued at run time; rename the config tenant", c.Name)}
			}
		}
		list = append(list, k)
	}
	a.h.cfg.Store(&cfg)
	a.list = list
	a.publish()
	return &result{}
}

func fromStore(s store.Key) (keys.Key, error) {
	var d [32]byte
	b, err := hex.DecodeString(s.KeyHash)
	if err != nil || len(b) != len(d) {
		return keys.Key{}, fmt.Errorf("key %q in the store has a malformed hash; revoke it in the database or restore a backup", s.Name)
	}
	copy(d[:], b)
	var id tenant.ID
	if len(s.TenantID) != tenant.IDLen {
		return keys.Key{}, fmt.Errorf("key %q in the store has a malformed tenant id %q", s.Name, s.TenantID)
	}
	copy(id[:], s.TenantID)
	k := keys.Key{Info: keys.Info{Name: s.Name, TenantID: s.TenantID, Source: keys.FromStore, Policy: s.Policy, KeySHA256Prefix: s.KeyHash[:8]}, Digest: d, ID: id}
	k.CreatedAt = timePtr(s.CreatedAt)
	k.RotatedAt = timePtr(s.RotatedAt)
	k.RevokedAt = timePtr(s.RevokedAt)
	return k, nil
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func (a *keysActor) publish() {
	s := keys.Build(a.list)
	a.h.pub = a.list
	a.h.snap.Store(s)
	if subs := a.h.subs.Load(); subs != nil {
		m := &messages.Published[*keys.Snapshot]{Snapshot: s}
		for _, pid := range *subs {
			a.h.root.Send(pid, m)
		}
	}
}

func (a *keysActor) find(name string) *keys.Key {
	for i := range a.list {
		if a.list[i].Name == name {
			return &a.list[i]
		}
	}
	return nil
}

func (a *keysActor) create(m *createKey) *result {
	if err := keys.ValidateName(m.name); err != nil {
		return &result{err: err}
	}
	if err := m.policy.Validate(""); err != nil {
		return &result{err: keys.NewError(apierror.CodeInvalidPolicy, firstField(err), err.Error())}
	}
	if k := a.find(m.name); k != nil {
		why := "an existing key"
		if k.Source == keys.FromConfig {
			why = "a config-file tenant"
		} else if k.RevokedAt != nil {
			why = "a revoked key (names are never reused)"
		}
		return &result{err: keys.NewError(apierror.CodeDuplicateKeyName, "name", fmt.Sprintf("name %q is used by %s; choose another name", m.name, why))}
	}
	secret, err := keys.GenerateSecret()
	if err != nil {
		return &result{err: err}
	}
	d := keys.Digest([]byte(secret))
	id := a.h.o.Resolver.IDForDigest(d)
	now := a.h.o.Clock.Now().UTC()
	sk := store.Key{Name: m.name, TenantID: id.String(), KeyHash: keys.HashHex(d), Policy: m.policy, CreatedAt: now}
	sctx, cancel := a.storeCtx()
	defer cancel()
	if err := a.h.o.Store.CreateKey(sctx, sk); err != nil {
		return &result{err: a.storeError(m.name, err)}
	}
	k, _ := fromStore(sk)
	a.list = append(a.list, k)
	a.publish()
	return &result{info: k.Info, secret: secret}
}

// change applies an operation to an active stored key: apply for policy
// and revocation, or a rotation.
func (a *keysActor) change(name string, apply func(*keys.Key) error, rotate bool) *result {
	k := a.find(name)
	if k == nil {
		// Another node may have created it since the last reload (a
		// shared store); read the store before answering 404.
		if err := a.refresh(); err != nil {
			return &result{err: a.storeError(name, err)}
		}
		k = a.find(name)
	}
	switch {
	case k == nil:
		return &result{err: keys.NewError(apierror.CodeKeyNotFound, "name", fmt.Sprintf("no key named %q", name))}
	case k.Source == keys.FromConfig:
		return &result{err: keys.NewError(apierror.CodeReadOnlyTenant, "name", name)}
	case k.RevokedAt != nil:
		return &result{err: keys.NewError(apierror.CodeKeyRevoked, "name", fmt.Sprintf("key %q is revoked; create a new key", name))}
	}
	var secret string
	if rotate {
		s, err := keys.GenerateSecret()
		if err != nil {
			return &result{err: err}
		}
		d := keys.Digest([]byte(s))
		at := a.h.o.Clock.Now().UTC()
		sctx, cancel := a.storeCtx()
		defer cancel()
		if err := a.h.o.Store.RotateKey(sctx, name, keys.HashHex(d), at); err != nil {
			return &result{err: a.storeError(name, err)}
		}
		k.Digest, k.KeySHA256Prefix, k.RotatedAt, secret = d, keys.HashHex(d)[:8], &at, s
	} else if err := apply(k); err != nil {
		return &result{err: a.storeError(name, err)}
	}
	a.publish()
	return &result{info: k.Info, secret: secret}
}

func firstField(err error) string {
	var es tenantpolicy.Errors
	if errors.As(err, &es) && len(es) > 0 {
		return es[0].Path
	}
	return ""
}

// storeError is the answer to a store failure. A failure of the store
// itself is logged in full (the operator's log may name the file) and
// answered without where the store is (store.PublicMessage).
func (a *keysActor) storeError(name string, err error) error {
	switch {
	case errors.Is(err, store.ErrDuplicateName):
		return keys.NewError(apierror.CodeDuplicateKeyName, "name", fmt.Sprintf("name %q is already used; choose another name", name))
	case errors.Is(err, store.ErrNotFound):
		return keys.NewError(apierror.CodeKeyNotFound, "name", fmt.Sprintf("no key named %q", name))
	case errors.Is(err, store.ErrRevoked):
		return keys.NewError(apierror.CodeKeyRevoked, "name", fmt.Sprintf("key %q is revoked", name))
	}
	a.h.o.Log.Warn("the key store failed", "key", name, "err", err)
	return keys.NewError(apierror.CodeKeyStoreUnavailable, "", "the key store failed ("+store.PublicMessage(err, "no detail")+"); keys already issued keep working; retry once the store answers")
}
