package quota

import (
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/omniroute/gateway/actors/supervise"
	"github.com/omniroute/gateway/internal/clusterwire"
	"github.com/omniroute/gateway/internal/rendezvous"
	"github.com/omniroute/gateway/internal/repeat"
	"github.com/omniroute/gateway/messages"
)

// Cluster mode shares quota telemetry between the members
// (docs/cluster.md, "Quota telemetry"):
//
//   - one member per connection polls the provider's usage API: the owner
//     rendezvous hashing picks from the connection's name and the member
//     ids, re-evaluated every CheckInterval against the member list, so
//     the members agree without talking and a membership change moves
//     only the connections of the member that came or went;
//   - the owner's poll readings and every member's header observations go
//     to the other members' cluster actors (PeersActorName), one remote
//     message per member for each poll and for each batch a header
//     adapter coalesced (HeaderFlushInterval paces them);
//   - a receiver feeds them into the connection's aggregator as readings
//     of the source they came from (a poll as provider_api, headers as
//     response_headers), where the freshest reading of a source wins as it
//     does locally, and never sends them on.
//
// The request path is unchanged: one local message per response, to the
// connection's header adapter.

// PeersActorName is the actor each member runs for its peers' quota
// readings; the remote layer delivers to it by name.
const PeersActorName = "omniroute-quota"

// DefaultCheckInterval is how often the cluster actor re-reads the
// member list and moves pollers.
const DefaultCheckInterval = 500 * time.Millisecond

// Member is one cluster member, as the cluster actor needs it.
type Member struct {
	ID      string
	Address string // host:port of its remote layer
	Self    bool
}

// ClusterOptions configure StartCluster.
type ClusterOptions struct {
	// Members returns the current member list (this member included, with
	// Self set). Called on the cluster actor every CheckInterval.
	Members func() []Member
	// CheckInterval is how often ownership is re-evaluated (default
	// DefaultCheckInterval).
	CheckInterval time.Duration
	// PID addresses a member's cluster actor; nil means PeersActorName at
	// the member's address (the remote layer). Tests route to local actors.
	PID func(Member) *actor.PID
	// Name is the actor's name (default PeersActorName).
	Name string
}

// ClusterStats is what health shows of the sharing.
type ClusterStats struct {
	// Sent counts messages sent to peers (one per peer per batch); Heard
	// the peers' messages applied; Dropped the ones that could not be
	// (malformed, or naming a connection this member does not have).
	Sent    int64 `json:"sent"`
	Heard   int64 `json:"heard"`
	Dropped int64 `json:"dropped"`
	// Polling are the connections whose usage API this member polls.
	Polling []string `json:"polling"`
}

// Cluster is a running cluster actor.
type Cluster struct {
	h                    *Handle
	pid                  *actor.PID
	sent, heard, dropped atomic.Int64
	polling              atomic.Pointer[[]string]
	refusals             clusterwire.Refusals
}

// clusterStrategy restarts the cluster actor after a panic: everything it
// decides is rebuilt at its next check from the member list and the
// connections' own polling flags, and its counters live in Cluster. A
// message that made it panic is dropped, which costs one batch of
// readings that the next one replaces.
var clusterStrategy = supervise.Restart("quota-cluster")

// StartCluster spawns this member's cluster actor and starts sharing: the
// aggregators hand it their poll readings, the header adapters their
// batches, and it starts and stops pollers by ownership. Call it once,
// after Spawn with Options.SharedPolls.
func (h *Handle) StartCluster(o ClusterOptions) (*Cluster, error) {
	if o.CheckInterval <= 0 {
		o.CheckInterval = DefaultCheckInterval
	}
	if o.PID == nil {
		o.PID = func(m Member) *actor.PID { return actor.NewPID(m.Address, PeersActorName) }
	}
	if o.Name == "" {
		o.Name = PeersActorName
	}
	cl := &Cluster{h: h}
	empty := []string{}
	cl.polling.Store(&empty)
	pid, err := h.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &clusterActor{cl: cl, o: o} },
		actor.WithGuardian(clusterStrategy)), o.Name)
	if err != nil {
		return nil, fmt.Errorf("spawning the quota cluster actor %q: %w", o.Name, err)
	}
	cl.pid = pid
	h.cluster.Store(cl)
	h.peers.Store(pid)
	return cl, nil
}

// Stats returns the counters and the connections this member polls.
func (cl *Cluster) Stats() ClusterStats {
	return ClusterStats{Sent: cl.sent.Load(), Heard: cl.heard.Load(), Dropped: cl.dropped.Load(), Polling: *cl.polling.Load()}
}

// stop ends the sharing and the actor (Handle.Stop calls it first).
func (cl *Cluster) stop() {
	cl.h.peers.Store(nil)
	_ = cl.h.root.PoisonFuture(cl.pid).Wait()
}

type checkMembers struct{}

// clusterActor owns the member view: who the peers are and which
// connections this member polls.
type clusterActor struct {
	cl    *Cluster
	o     ClusterOptions
	self  string
	peers []*actor.PID
	ticks repeat.Ticker
	// known are the peer ids of the last check: a member not among them
	// has joined since, and has heard none of the polls this member made.
	known map[string]bool
	// byName maps connection names to ids, rebuilt when connections are
	// added (builtLen is the count it was built for). A reload that renames
	// makes a new connection, so a name's id changes only when a removed
	// connection's name comes back on a new id: the live one wins.
	byName   map[string]int
	builtLen int
}

func (a *clusterActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case messages.Crash:
		m.Panic()
	case *actor.Started:
		a.check(ctx)
		a.ticks.Start(ctx, a.cl.h.clk, a.o.CheckInterval, checkMembers{})
	case *actor.Restarting, *actor.Stopping:
		a.ticks.Stop()
	case checkMembers:
		a.check(ctx)
	case *sharePoll:
		if name := a.connName(m.conn); name != "" {
			p := encodePoll(name, m.reading, m.at)
			p.From = a.self
			a.send(ctx, p)
		}
	case *shareHeaders:
		if name := a.connName(m.conn); name != "" {
			h := encodeHeaders(name, m.obs)
			h.From = a.self
			a.send(ctx, h)
		}
	case *wrapperspb.BytesValue:
		a.receive(ctx, m)
	}
}

// check re-reads the members and starts or stops this member's pollers.
func (a *clusterActor) check(ctx actor.Context) {
	ms := a.o.Members()
	ids := make([]string, 0, len(ms)+1)
	a.peers, a.self = a.peers[:0], ""
	known := make(map[string]bool, len(ms))
	joined := false
	for _, m := range ms {
		ids = append(ids, m.ID)
		if m.Self {
			a.self = m.ID
		} else {
			a.peers = append(a.peers, a.o.PID(m))
			known[m.ID] = true
			joined = joined || (a.known != nil && !a.known[m.ID])
		}
	}
	a.known = known
	if a.self == "" {
		// Not (yet) in its own list: it polls nothing rather than
		// everything, and its peers, who do see members, decide.
		a.self = "\x00none"
	}
	h := a.cl.h
	var polling []string
	for i := 0; i < h.Len(); i++ {
		c := *h.conns.At(i)
		name := c.name.Load()
		want := name != nil && !c.removed.Load() && c.hasPoll.Load() && rendezvous.Owner(*name, ids) == a.self
		if want {
			polling = append(polling, *name)
		}
		if joined && !c.removed.Load() {
			// A member that joined heard none of the header batches sent
			// before; the latest ones still in force go again.
			if hp := c.header.Load(); hp != nil {
				ctx.Send(hp, reshareHeaders{})
			}
		}
		pid := c.live.Load()
		if pid == nil || c.removed.Load() {
			c.polling.Store(want)
			continue
		}
		if c.polling.Swap(want) != want {
			ctx.Send(pid, &setPolling{on: want})
		} else if want && joined {
			// A member that joined would otherwise wait up to a poll
			// interval (a minute by default) for this connection's state.
			ctx.Send(pid, resharePoll{})
		}
	}
	sort.Strings(polling)
	if polling == nil {
		polling = []string{}
	}
	a.cl.polling.Store(&polling)
}

func (a *clusterActor) connName(conn int) string {
	c, ok := a.cl.h.conns.Get(conn)
	if !ok {
		return ""
	}
	if n := (*c).name.Load(); n != nil {
		return *n
	}
	return ""
}

// send encodes m and sends it to every peer once.
func (a *clusterActor) send(ctx actor.Context, m messages.ClusterMessage) {
	if len(a.peers) == 0 {
		return
	}
	msg, err := clusterwire.Wrap(m)
	if err != nil {
		a.cl.dropped.Add(1)
		return
	}
	// Counted before the sends, so that whoever sees a peer act on the
	// batch also sees it counted here.
	a.cl.sent.Add(int64(len(a.peers)))
	for _, pid := range a.peers {
		ctx.Send(pid, msg)
	}
}

// receive applies a peer's readings to the connection of the same name.
// Only current members' messages arrive: internal/cluster's gate drops
// what anyone else sends to this actor's name (docs/cluster.md, "Trust").
// A message this member cannot read (malformed, or from a member of
// another release) is dropped, counted and logged once.
func (a *clusterActor) receive(ctx actor.Context, v *wrapperspb.BytesValue) {
	m, err := clusterwire.Unwrap(v)
	var conn, from string
	switch w := m.(type) {
	case *messages.SharedQuotaPoll:
		conn, from = w.Conn, w.From
	case *messages.SharedQuotaHeaders:
		conn, from = w.Conn, w.From
	default:
		if err == nil {
			err = fmt.Errorf("%w: a %s sent to the quota cluster actor", messages.ErrClusterMessage, m.ClusterKind())
		}
	}
	if err != nil {
		a.cl.dropped.Add(1)
		a.cl.refusals.Note(ctx.Logger(), "quota cluster actor", err)
		return
	}
	if from == a.self {
		a.cl.dropped.Add(1)
		return
	}
	h := a.cl.h
	fromTheFuture(m, h.clk.Now())
	id, ok := a.lookup(conn)
	if !ok {
		a.cl.dropped.Add(1)
		return
	}
	c := *h.conns.At(id)
	if c.removed.Load() {
		a.cl.dropped.Add(1)
		return
	}
	// Counted before the readings are passed on, so that whoever sees
	// their effect also sees them counted.
	a.cl.heard.Add(1)
	switch w := m.(type) {
	case *messages.SharedQuotaPoll:
		reading, at := pollReading(w)
		if pid := c.live.Load(); pid != nil {
			ctx.Send(pid, &peerPoll{reading: reading, at: at})
		}
	case *messages.SharedQuotaHeaders:
		if pid := c.header.Load(); pid != nil && len(w.Observations) > 0 {
			ctx.Send(pid, &peerHeaders{obs: decodeHeaders(w.Observations)})
		}
	}
}

func (a *clusterActor) lookup(name string) (int, bool) {
	h := a.cl.h
	if n := h.Len(); n != a.builtLen || a.byName == nil {
		a.byName, a.builtLen = make(map[string]int, n), n
		for i := 0; i < n; i++ {
			c := *h.conns.At(i)
			if nm := c.name.Load(); nm != nil {
				if old, dup := a.byName[*nm]; !dup || (*h.conns.At(old)).removed.Load() {
					a.byName[*nm] = i
				}
			}
		}
	}
	id, ok := a.byName[name]
	return id, ok
}
