// Package etcdmembers is the cluster's membership through etcd: a
// protoactor-go ClusterProvider. Each member keeps one key under
// <prefix>/<cluster>/ on a lease it keeps alive, and publishes the member
// list it reads from etcd to protoactor's MemberList.
//
// It replaces protoactor's own etcd provider, which loses members after
// etcd has been away: it drops a member (itself included) on a delete
// event and then ignores its own re-registration, and it never reads the
// whole list again, so after an outage nodes saw themselves or their
// peers missing for good (internal/clustere2e's TestEtcdOutage). Here the
// list is always read whole (at start, after every watch event, after a
// watch or lease is re-established, and every Resync), and a member is
// always in its own list. While etcd cannot be read the last list stays:
// an unreachable etcd is not a cluster of one.
package etcdmembers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/omniroute/gateway/internal/clock"
)

// Options tune the provider; zero values take the defaults.
type Options struct {
	// TTL is the lease of a member's key: a member that stops renewing
	// it leaves the list that long after (default 3 s).
	TTL time.Duration
	// Retry is the pause before trying etcd again (default 1 s).
	Retry time.Duration
	// Resync is how often the whole list is read even without events
	// (default 5 s).
	Resync time.Duration
	// Grace keeps a member that vanished from etcd in the list for this
	// long after etcd was last unreachable (default 20 s). When etcd
	// comes back, the members' old leases may expire before their client
	// has reconnected and registered again; dropping them then would be
	// for good (protoactor blocks a member that once left). Outside that
	// window a vanished member is dropped at once.
	Grace time.Duration
	// Clock reads the time the grace is measured on (default the real
	// clock; tests move a fake one).
	Clock clock.Clock
}

// Provider is one member's registration and view.
type Provider struct {
	client *clientv3.Client
	prefix string // <base>/<cluster>/
	base   string
	o      Options

	// publish hands a changed list to protoactor's MemberList (a test
	// sink in the unit tests); log is the cluster's logger.
	publish func(pcluster.Members)
	log     *slog.Logger
	self    record
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu        sync.Mutex // serialises publish
	published string     // fingerprint of the last published list
	last      map[string]record
	lastErr   error
	failedAt  time.Time // when etcd last failed (zero: never)
}

// record is what a member's key holds.
type record struct {
	ID    string   `json:"id"`
	Host  string   `json:"host"`
	Port  int      `json:"port"`
	Kinds []string `json:"kinds"`
}

// New returns a provider over client, keys under base (for example
// "/omniroute/members").
func New(client *clientv3.Client, base string, o Options) *Provider {
	if o.TTL <= 0 {
		o.TTL = 3 * time.Second
	}
	if o.Retry <= 0 {
		o.Retry = time.Second
	}
	if o.Resync <= 0 {
		o.Resync = 5 * time.Second
	}
	if o.Grace <= 0 {
		o.Grace = 20 * time.Second
	}
	o.Clock = clock.Or(o.Clock)
	return &Provider{client: client, base: strings.TrimSuffix(base, "/"), o: o}
}

// StartMember registers this member and starts following the list.
func (p *Provider) StartMember(c *pcluster.Cluster) error {
	if err := p.init(c); err != nil {
		return err
	}
	return p.startMember()
}

func (p *Provider) startMember() error {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	lease, err := p.register(ctx)
	if err != nil {
		cancel()
		return fmt.Errorf("etcdmembers: cannot register member %s: %w", p.self.ID, err)
	}
	if err := p.sync(ctx); err != nil {
		cancel()
		return fmt.Errorf("etcdmembers: cannot read the member list: %w", err)
	}
	p.wg.Add(3)
	go p.keepAlive(ctx, lease)
	go p.watch(ctx)
	go p.resync(ctx)
	return nil
}

// StartClient follows the list without registering.
func (p *Provider) StartClient(c *pcluster.Cluster) error {
	if err := p.init(c); err != nil {
		return err
	}
	p.self = record{} // a client is not in the list
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	if err := p.sync(ctx); err != nil {
		cancel()
		return fmt.Errorf("etcdmembers: cannot read the member list: %w", err)
	}
	p.wg.Add(2)
	go p.watch(ctx)
	go p.resync(ctx)
	return nil
}

// Shutdown removes this member's key (best effort) and stops following.
func (p *Provider) Shutdown(bool) error {
	if p.cancel == nil {
		return nil
	}
	p.cancel()
	p.wg.Wait()
	if p.self.ID == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := p.client.Delete(ctx, p.key())
	return err
}

// GetHealthStatus is the last error reading or writing etcd (nil: none
// since the last success).
func (p *Provider) GetHealthStatus() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr
}

func (p *Provider) init(c *pcluster.Cluster) error {
	p.publish, p.log = c.MemberList.UpdateClusterTopology, c.Logger()
	host, port, err := net.SplitHostPort(c.ActorSystem.Address())
	if err != nil {
		return fmt.Errorf("etcdmembers: the actor system's address %q is not host:port: %w", c.ActorSystem.Address(), err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return fmt.Errorf("etcdmembers: the actor system's address %q has no port", c.ActorSystem.Address())
	}
	kinds := c.GetClusterKinds()
	if kinds == nil {
		kinds = []string{}
	}
	// The id protoactor's provider used: "<cluster>@<system id>".
	p.setSelf(c.Config.Name, record{ID: c.Config.Name + "@" + c.ActorSystem.ID, Host: host, Port: n, Kinds: kinds})
	return nil
}

func (p *Provider) setSelf(cluster string, self record) {
	p.prefix = p.base + "/" + cluster + "/"
	p.self = self
}

func (p *Provider) key() string { return p.prefix + p.self.ID }

// register puts this member's key on a new lease.
func (p *Provider) register(ctx context.Context) (clientv3.LeaseID, error) {
	data, err := json.Marshal(p.self)
	if err != nil {
		return 0, err
	}
	g, err := p.client.Grant(ctx, int64(max(p.o.TTL/time.Second, 1)))
	if err != nil {
		return 0, err
	}
	if _, err := p.client.Put(ctx, p.key(), string(data), clientv3.WithLease(g.ID)); err != nil {
		return 0, err
	}
	return g.ID, nil
}

// keepAlive renews the lease; when it is lost (etcd was away longer than
// the TTL, or forgot it) it registers again on a new one and re-reads
// the list.
func (p *Provider) keepAlive(ctx context.Context, lease clientv3.LeaseID) {
	defer p.wg.Done()
	for ctx.Err() == nil {
		if lease != 0 {
			ch, err := p.client.KeepAlive(ctx, lease)
			if err == nil {
				for range ch { // closed when the lease is gone or ctx ends
				}
			}
			p.fail(fmt.Errorf("the lease of member %s lapsed", p.self.ID))
		}
		if !sleep(ctx, p.o.Retry) {
			return
		}
		var err error
		if lease, err = p.register(ctx); err != nil {
			lease = 0
			p.fail(err)
			continue
		}
		_ = p.sync(ctx)
	}
}

// watch re-reads the list on every change under the prefix; a watch that
// ends (etcd away, compaction) is opened again after a full read.
func (p *Provider) watch(ctx context.Context) {
	defer p.wg.Done()
	for ctx.Err() == nil {
		wch := p.client.Watch(clientv3.WithRequireLeader(ctx), p.prefix, clientv3.WithPrefix())
		for resp := range wch {
			if err := resp.Err(); err != nil {
				p.fail(err)
				break
			}
			_ = p.sync(ctx)
		}
		if !sleep(ctx, p.o.Retry) {
			return
		}
		_ = p.sync(ctx)
	}
}

// resync reads the whole list every Resync, whatever the watch saw.
func (p *Provider) resync(ctx context.Context) {
	defer p.wg.Done()
	t := time.NewTicker(p.o.Resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = p.sync(ctx)
		}
	}
}

// sync reads the members from etcd and publishes them (with this member
// always among them) when they changed. On a read error the last list
// stays.
func (p *Provider) sync(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := p.client.Get(rctx, p.prefix, clientv3.WithPrefix())
	if err != nil {
		p.fail(err)
		return err
	}
	values := make([][]byte, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		values[i] = kv.Value
	}
	p.mu.Lock()
	// etcd was away a moment ago: a member missing from it may not have
	// registered again yet, so it stays.
	keepAbsent := !p.failedAt.IsZero() && p.o.Clock.Now().Sub(p.failedAt) < p.o.Grace
	byID := view(values, p.self, p.last, keepAbsent)
	p.mu.Unlock()
	ids := slices.Sorted(maps.Keys(byID))
	var fp strings.Builder
	members := make(pcluster.Members, 0, len(ids))
	for _, id := range ids {
		r := byID[id]
		fmt.Fprintf(&fp, "%s@%s:%d;", r.ID, r.Host, r.Port)
		members = append(members, &pcluster.Member{Id: r.ID, Host: r.Host, Port: int32(r.Port), Kinds: r.Kinds})
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastErr = nil
	if fp.String() == p.published || ctx.Err() != nil {
		return nil
	}
	p.published, p.last = fp.String(), byID
	p.log.Info("cluster members", slog.Int("members", len(members)), slog.String("list", fp.String()))
	p.publish(members)
	return nil
}

// view is the member list from the records read from etcd: the members
// that wrote one (values that are not a member record are skipped), this
// member always (self, unless it is a client), and, when keepAbsent, the
// members of last that etcd no longer lists.
func view(values [][]byte, self record, last map[string]record, keepAbsent bool) map[string]record {
	byID := map[string]record{}
	for _, v := range values {
		var r record
		if err := json.Unmarshal(v, &r); err != nil || r.ID == "" {
			continue // not a member record this provider wrote
		}
		byID[r.ID] = r
	}
	if self.ID != "" {
		byID[self.ID] = self
	}
	if keepAbsent {
		for id, r := range last {
			if _, ok := byID[id]; !ok {
				byID[id] = r
			}
		}
	}
	return byID
}

func (p *Provider) fail(err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	p.mu.Lock()
	p.lastErr, p.failedAt = err, p.o.Clock.Now()
	p.mu.Unlock()
}

// sleep waits d or until ctx ends; false means ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
