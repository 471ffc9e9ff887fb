// Package cluster starts this node's membership of the gateway cluster: the
// protoactor-go cluster on the gateway's actor system, members found
// through etcd (or the in-memory test provider in unit tests), identities
// placed by disthash (rendezvous hashing). It owns nothing of the request
// path: the shared-credit grains and the node's lease pools live in
// actors/credit, which registers its kinds here.
//
// Members authenticate each other on every address, loopback included:
// the remote layer is mutual TLS under a CA derived from the cluster secret
// (secret.go) or the operator's certificates (tls.go), and the gate
// (gate.go) delivers a remote message only from a current member. Tenant
// ids need one install secret across the members (installsecret.go).
//
// protoactor's cluster is alpha-quality around its edges, and this package
// is where that is contained: StartMember panics instead of returning an
// error (Start recovers it into one), it sleeps one second, Shutdown sleeps
// two and stops the whole actor system (Stop is therefore the last thing a
// gateway does), and the remote layer logs ordinary shutdown events at
// error level (QuietLogs demotes them).
package cluster

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/omniroute/gateway/internal/cluster/etcdmembers"
)

// Config is one member's settings (internal/config.ClusterEnv, resolved).
type Config struct {
	// Name is the cluster name; members with the same name form a cluster.
	Name string
	// EtcdEndpoints are etcd's client endpoints (host:port).
	EtcdEndpoints []string
	// Listen is the remote layer's host:port (port 0: any free port).
	Listen string
	// Advertise is the host:port other members dial ("" = Listen).
	Advertise string
	// RequestTimeout bounds one grain call (default 2 s). A lease refill
	// that times out leaves the pool to fail closed when it runs dry.
	RequestTimeout time.Duration
	// Secret is the members' shared secret (OMNIROUTE_CLUSTER_SECRET): the
	// remote layer's mutual TLS derived from it (secret.go). RemoteTLS is
	// the alternative: the operator's own certificates. Exactly one is set.
	Secret string
	// RemoteTLS makes the remote layer mutual TLS with certificate files.
	RemoteTLS TLSFiles
	// EtcdTLS is TLS to etcd (off: plaintext); DialEtcd takes the same.
	EtcdTLS TLSFiles
}

// Options are what the node is built with beyond its Config.
type Options struct {
	// Kinds are the grain kinds this member hosts.
	Kinds []*pcluster.Kind
	// Provider replaces the etcd provider (tests pass the in-memory test
	// provider); nil builds etcd from Config.EtcdEndpoints.
	Provider pcluster.ClusterProvider
	// Etcd is the client DialEtcd returned, which the node owns from now
	// on (it closes it on Stop or a failed Start). Required with the etcd
	// provider.
	Etcd *clientv3.Client
}

// Node is this process's membership.
type Node struct {
	c       *pcluster.Cluster
	cfg     Config
	etcd    *clientv3.Client // nil with a test provider
	gate    *gate
	unwatch func()
	closed  sync.Once
}

// Start joins the cluster. It returns an error, never panics, when the
// members' credential is missing or unreadable, the listen address is
// taken, etcd cannot be reached or the provider refuses: the gateway then
// stops with that error instead of serving alone.
func Start(system *actor.ActorSystem, cfg Config, o Options) (n *Node, err error) {
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 2 * time.Second
	}
	host, port, err := splitListen(cfg.Listen)
	if err != nil {
		return nil, err
	}
	srv, cli, pki, err := cfg.memberTLS()
	if err != nil {
		if o.Etcd != nil {
			o.Etcd.Close()
		}
		return nil, err
	}
	n = &Node{cfg: cfg, etcd: o.Etcd, gate: newGate(pki, system.Logger())}
	ropts := remoteOptions(srv, cli, n.gate)
	if cfg.Advertise != "" {
		ropts = append(ropts, remote.WithAdvertisedHost(cfg.Advertise))
	}
	provider := o.Provider
	if provider == nil {
		if o.Etcd == nil {
			return nil, fmt.Errorf("cluster: no etcd client; call DialEtcd first")
		}
		// The membership shares the node's etcd client.
		provider = etcdmembers.New(o.Etcd, "/omniroute/members", etcdmembers.Options{})
	}
	ccfg := pcluster.Configure(cfg.Name, provider, disthash.New(), remote.Configure(host, port, ropts...),
		pcluster.WithKinds(o.Kinds...), pcluster.WithRequestTimeout(cfg.RequestTimeout))
	n.c = pcluster.New(system, ccfg)
	// Subscribed before the member starts: the first list it publishes
	// opens the gate to the members in it.
	n.unwatch = n.gate.watchTopology(system)
	defer func() {
		if r := recover(); r != nil {
			n.unwatch()
			if n.etcd != nil {
				n.etcd.Close()
			}
			n, err = nil, fmt.Errorf("cluster: joining cluster %q failed: %v; check that etcd at %v is reachable and OMNIROUTE_CLUSTER_LISTEN=%s is free", cfg.Name, r, cfg.EtcdEndpoints, cfg.Listen)
		}
	}()
	n.c.StartMember()
	return n, nil
}

// DialEtcd connects to etcd and checks that an endpoint answers, so that
// a gateway pointed at no etcd stops with an error naming it (protoactor's
// provider would panic deep inside StartMember instead).
func DialEtcd(endpoints []string, tf TLSFiles) (*clientv3.Client, error) {
	ecfg, err := etcdConfig(endpoints, tf)
	if err != nil {
		return nil, err
	}
	ec, err := clientv3.New(ecfg)
	if err != nil {
		return nil, fmt.Errorf("cluster: cannot create the etcd client for %v: %w; check OMNIROUTE_CLUSTER_ETCD_ENDPOINTS", endpoints, err)
	}
	var errs []error
	for _, ep := range endpoints {
		ctx, cancel := contextWithTimeout(5 * time.Second)
		_, err := ec.Status(ctx, ep)
		cancel()
		if err == nil {
			return ec, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", ep, err))
	}
	ec.Close()
	hint := "start etcd or fix OMNIROUTE_CLUSTER_ETCD_ENDPOINTS"
	if tf.On() {
		hint += ", and check that OMNIROUTE_CLUSTER_ETCD_CA signed etcd's certificate (and OMNIROUTE_CLUSTER_ETCD_CERT is one etcd accepts)"
	}
	return nil, fmt.Errorf("cluster: no etcd endpoint answered (%w); %s", errors.Join(errs...), hint)
}

// etcdConfig is the etcd client's configuration: TLS when tf is on.
func etcdConfig(endpoints []string, tf TLSFiles) (clientv3.Config, error) {
	c := clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second}
	if tf.On() {
		tc, err := tf.clientConfig()
		if err != nil {
			return c, err
		}
		c.TLS = tc
	}
	return c, nil
}

func splitListen(s string) (string, int, error) {
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, fmt.Errorf("cluster: cannot parse listen address %q: want host:port", s)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("cluster: listen address %q has no valid port", s)
	}
	return host, port, nil
}

// Cluster is the protoactor cluster, for grain calls.
func (n *Node) Cluster() *pcluster.Cluster { return n.c }

// Etcd is the etcd client the membership uses (nil with a test provider);
// actors/credit keeps its durable budget records through it.
func (n *Node) Etcd() *clientv3.Client { return n.etcd }

// ID is this member's id (unique per process start).
func (n *Node) ID() string { return n.c.ActorSystem.ID }

// Address is the host:port other members reach this one at.
func (n *Node) Address() string { return n.c.ActorSystem.Address() }

// Trust is health's account of how members authenticate each other.
type Trust struct {
	// Mode is "secret" (OMNIROUTE_CLUSTER_SECRET) or "certificates".
	Mode string `json:"mode"`
	// Refused counts the message envelopes from peers that were not
	// current members, dropped unread.
	Refused int64 `json:"refused"`
}

// Trust reports the authentication mode and what the gate refused.
func (n *Node) Trust() Trust {
	t := Trust{Mode: "secret", Refused: n.gate.refused.Load()}
	if n.gate.pki {
		t.Mode = "certificates"
	}
	return t
}

// Member is one member as health shows it.
type Member struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	Self    bool   `json:"self,omitempty"`
}

// Members lists the members this node sees, sorted by address.
func (n *Node) Members() []Member {
	ms := n.c.MemberList.Members().Members()
	out := make([]Member, 0, len(ms))
	for _, m := range ms {
		addr := net.JoinHostPort(m.Host, strconv.Itoa(int(m.Port)))
		// The etcd provider names members "<cluster>@<system id>".
		self := m.Id == n.ID() || strings.HasSuffix(m.Id, "@"+n.ID())
		out = append(out, Member{ID: m.Id, Address: addr, Self: self})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Address < out[j].Address })
	return out
}

// Stop leaves the cluster gracefully: this member's grains move to the
// others. It stops the actor system too (protoactor's Shutdown does), and
// takes about two seconds; call it last.
func (n *Node) Stop() {
	n.closed.Do(func() {
		n.c.Shutdown(true)
		n.unwatch()
		if n.etcd != nil {
			n.etcd.Close()
		}
	})
}
