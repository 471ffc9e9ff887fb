// Package quota owns each provider connection's quota telemetry. Per
// connection one aggregator actor supervises one child actor per source
// adapter:
//
//   - the poller asks the provider's usage API (OpenRouter GET /key and
//     /credits, DeepSeek GET /user/balance) on an interval, backing off on
//     failure;
//   - the header adapter receives the rate-limit headers of every response
//     (fire-and-forget, forwarded by the targets actor) parsed through the
//     connection's explicit mapping;
//   - the configured adapter reports the limits from the config file;
//   - the estimate adapter reads the token ledger's published snapshot
//     (through a function the composition root provides, so this package
//     does not import another actor's).
//
// The aggregator merges their readings per dimension by source rank
// (internal/quota.Collect), per model served through the connection, and
// publishes the connection's state as an immutable snapshot. Routing reads
// ModelStatus from that snapshot and never sends a message.
//
// In cluster mode (Options.SharedPolls, then StartCluster) one node actor
// per member shares the telemetry: one member per connection polls, and
// poll readings and header observations reach every member's aggregators
// (cluster.go).
package quota

import (
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/growable"
	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/messages"
)

// PollSpec configures a connection's usage-API poller.
type PollSpec struct {
	Kind     string // quota.PollOpenRouter or quota.PollDeepSeek
	BaseURL  string // API root: OpenRouter's …/api/v1, DeepSeek's origin
	Interval time.Duration
	Timeout  time.Duration
	// APIKey is the connection's credential; it is sent as a bearer token
	// and appears nowhere else (not in errors, not in snapshots).
	APIKey string
}

// ConnSpec describes one connection.
type ConnSpec struct {
	Provider string
	Name     string // "provider/connection"
	// Models are the upstream models served through the connection; model
	// indexes in ModelStatus refer to this list.
	Models  []string
	Mapping *quota.Mapping
	// Configured values (limits from the config file), connection-wide.
	Configured []quota.Value
	Poll       *PollSpec
	// Budgeted is true when the token ledger keeps budgets for the
	// connection: an estimate adapter reads them.
	Budgeted bool
}

// Options tune the actors.
type Options struct {
	// Threshold is the remaining share at or below which a dimension is
	// approaching its limit (default 0.2).
	Threshold float64
	// Estimates returns the token ledger's current values for a
	// connection's budgets (source estimated, model-scoped); nil disables
	// the estimate adapters.
	Estimates func(conn int) []quota.Value
	// HTTPClient performs polls; nil builds one without keep-alives.
	HTTPClient *http.Client
	// OnPoll is told about every poll (on the poller's goroutine).
	OnPoll func(conn int, ok bool)
	// SharedPolls is cluster mode: a connection's usage-API poller runs
	// only while the cluster actor (StartCluster) says this member owns
	// the connection, so pollers start stopped. Off, every connection with
	// a usage API polls from the start, as a single node always has.
	SharedPolls bool
}

// ModelState is one model's merged view.
type ModelState struct {
	Model  string        `json:"model"`
	Status quota.Status  `json:"status"`
	Values []quota.Value `json:"values"`
	// Until is when the state may change by itself (a value expires);
	// StatusUntil how long an exhausted or approaching status holds.
	Until       time.Time `json:"-"`
	StatusUntil time.Time `json:"-"`
}

// ConnState is one connection's published telemetry.
type ConnState struct {
	ProviderID   string       `json:"providerId"`
	ConnectionID string       `json:"connectionId"`
	Supported    bool         `json:"supported"`
	FetchedAt    time.Time    `json:"fetchedAt"`
	Status       quota.Status `json:"status"`
	// Values are the connection-wide values (credits, balances, configured
	// limits); model-scoped values are under Models.
	Values  []quota.Value `json:"values"`
	Error   string        `json:"error,omitempty"`
	Sources []string      `json:"sources"`
	Models  []ModelState  `json:"models"`
}

// Handle is what the transport holds.
type Handle struct {
	root *actor.RootContext
	// conns are the connections by id; Add grows them, Remove stops one
	// (its entry stays, so ids never shift).
	conns  *growable.List[*conn]
	clk    clock.Clock
	opts   Options
	system *actor.ActorSystem
	gen    int // spawns so far, for unique actor names (writer only)
	// peers is the cluster actor that shares readings with the other
	// members (nil in single-node mode and until StartCluster).
	peers   atomic.Pointer[actor.PID]
	cluster atomic.Pointer[Cluster]
}

type conn struct {
	agg *actor.PID // the writer's (Add, Set, Remove, Stop)
	// live is agg for concurrent readers (the cluster actor).
	live atomic.Pointer[actor.PID]
	// name is the connection's name ("provider/connection"), how peers
	// name it; hasPoll says its spec has a usage API.
	name    atomic.Pointer[string]
	hasPoll atomic.Bool
	// polling says this member should run the connection's poller (cluster
	// mode: the cluster actor sets it for the connections it owns); a
	// restarted aggregator reads it.
	polling atomic.Bool
	// header is the live header adapter: each aggregator incarnation
	// spawns a new one (a restart stops the children), so Observe reads it
	// here instead of keeping the first one's PID.
	header atomic.Pointer[actor.PID]
	snap   atomic.Pointer[ConnState]
	// models are the upstream models the aggregator serves (its spec's
	// plus those AddModels registered), for a restarted incarnation.
	models atomic.Pointer[[]string]
	// removed is set by Remove: the aggregator and its adapters (the
	// poller included) are stopped and State reports nothing.
	removed atomic.Bool
}

// Spawn starts one aggregator (with its adapters) per connection.
func Spawn(system *actor.ActorSystem, specs []ConnSpec, clk clock.Clock, o Options) (*Handle, error) {
	if o.Threshold <= 0 || o.Threshold >= 1 {
		o.Threshold = quota.DefaultApproachingThreshold
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true, ResponseHeaderTimeout: 30 * time.Second}}
	}
	h := &Handle{root: system.Root, clk: clk, opts: o, system: system, conns: &growable.List[*conn]{}}
	for i := range specs {
		if _, err := h.Add(specs[i]); err != nil {
			h.Stop()
			return nil, err
		}
	}
	return h, nil
}

// Add starts the aggregator (with its adapters) of a connection added at
// run time and returns its id, the next one. The connection's state is
// published before Add returns, so a config routing to it can be
// published next. Calls to Add, Set, AddModels and Remove must not
// overlap.
func (h *Handle) Add(spec ConnSpec) (int, error) {
	i := h.conns.Len()
	c := &conn{}
	if err := h.start(c, i, spec); err != nil {
		return 0, err
	}
	h.conns.Append(c)
	return i, nil
}

// Set restarts connection conn with spec (its endpoint, credential or
// usage API changed, or a removed connection comes back): the running
// aggregator and its adapters stop, their readings are dropped (a new
// credential is a new quota), and fresh ones start from spec, whose
// Models must begin with the connection's current models in order (model
// indexes stay).
func (h *Handle) Set(conn int, spec ConnSpec) error {
	cp, ok := h.conns.Get(conn)
	if !ok {
		return fmt.Errorf("quota: no connection %d", conn)
	}
	c := *cp
	if !c.removed.Load() {
		_ = h.root.PoisonFuture(c.agg).Wait()
	}
	if err := h.start(c, conn, spec); err != nil {
		c.removed.Store(true)
		c.snap.Store(nil)
		return err
	}
	c.removed.Store(false)
	return nil
}

// start spawns c's aggregator for spec, publishes its first state and
// waits for its header adapter.
func (h *Handle) start(c *conn, i int, spec ConnSpec) error {
	ready := make(chan struct{})
	o, clk := h.opts, h.clk
	spec.Models = slices.Clone(spec.Models)
	name := spec.Name
	c.name.Store(&name)
	c.hasPoll.Store(spec.Poll != nil)
	(&aggregator{id: i, spec: spec, c: c, clk: clk, opts: o}).publish(clk.Now())
	// A restarted aggregator starts with the models AddModels registered.
	c.models.Store(&spec.Models)
	produce := func() actor.Actor {
		sp := spec
		sp.Models = *c.models.Load()
		return &aggregator{id: i, spec: sp, c: c, clk: clk, opts: o, ready: ready, peers: &h.peers}
	}
	h.gen++
	pid, err := h.system.Root.SpawnNamed(actor.PropsFromProducer(produce, actor.WithGuardian(aggregatorStrategy),
		actor.WithSupervisor(adapterStrategy)), fmt.Sprintf("quota-%p-%d-%d", h, i, h.gen))
	if err != nil {
		return fmt.Errorf("spawning quota actor for %s: %w", spec.Name, err)
	}
	c.agg = pid
	c.live.Store(pid)
	// The aggregator spawns its children in Started; wait for the
	// header adapter so Observe never races the start.
	<-ready
	return nil
}

// addModels registers upstream models with an aggregator.
type addModels struct{ models []string }

// AddModels registers upstream models newly served through connection
// conn (a reload adding a target on an existing connection); their model
// indexes follow the existing ones, in order. It returns once the
// connection's state lists them.
func (h *Handle) AddModels(conn int, models []string) error {
	c, ok := h.conns.Get(conn)
	if !ok || (*c).removed.Load() {
		return fmt.Errorf("quota: connection %d is not running", conn)
	}
	if _, err := h.root.RequestFuture((*c).agg, &addModels{models: slices.Clone(models)}, 5*time.Second).Result(); err != nil {
		return fmt.Errorf("registering models %v with the quota actor of connection %d: %w", models, conn, err)
	}
	return nil
}

// Remove stops connection conn's aggregator and adapters (its usage-API
// poller stops polling: a poll in flight is cancelled) and waits for
// them; State reports nil for it from then on. Its id stays taken.
func (h *Handle) Remove(conn int) {
	c, ok := h.conns.Get(conn)
	if !ok || !(*c).removed.CompareAndSwap(false, true) {
		return
	}
	_ = h.root.PoisonFuture((*c).agg).Wait()
	(*c).snap.Store(nil)
}

// Stop stops the cluster actor (if any), every aggregator and its
// adapters, and waits for them.
func (h *Handle) Stop() {
	if cl := h.cluster.Swap(nil); cl != nil {
		cl.stop()
	}
	for i := 0; i < h.conns.Len(); i++ {
		if c := *h.conns.At(i); c.agg != nil && !c.removed.Load() {
			_ = h.root.PoisonFuture(c.agg).Wait()
		}
	}
}

// headerObserved is a response's parsed rate-limit headers for one model
// (this node's, or a peer's inside peerHeaders).
type headerObserved struct {
	Model string
	Obs   *messages.QuotaObservation
}

// Observe forwards a response's headers to the connection's header adapter
// (fire-and-forget).
func (h *Handle) Observe(conn int, model string, obs *messages.QuotaObservation) {
	c, ok := h.conns.Get(conn)
	if !ok || obs == nil || obs.N == 0 || (*c).removed.Load() {
		return
	}
	h.root.Send((*c).header.Load(), &headerObserved{Model: model, Obs: obs})
}

// State returns a connection's published state.
func (h *Handle) State(conn int) *ConnState {
	c, ok := h.conns.Get(conn)
	if !ok {
		return nil
	}
	return (*c).snap.Load()
}

// Len is the number of connection ids (removed ones included).
func (h *Handle) Len() int { return h.conns.Len() }

// ModelStatus returns the quota status routing should use for model index
// mi of conn at now. A status whose evidence has expired is not trusted
// (unknown) until the aggregator republishes.
func (h *Handle) ModelStatus(conn, mi int, now time.Time) quota.Status {
	st := h.State(conn)
	if st == nil || mi < 0 || mi >= len(st.Models) {
		return quota.StatusUnknown
	}
	m := &st.Models[mi]
	if !m.StatusUntil.IsZero() && !now.Before(m.StatusUntil) && (m.Status == quota.StatusExhausted || m.Status == quota.StatusApproaching) {
		return quota.StatusUnknown
	}
	return m.Status
}

// Recovery returns when model mi of conn stops being exhausted by the
// evidence at hand (zero when unknown).
func (h *Handle) Recovery(conn, mi int) time.Time {
	st := h.State(conn)
	if st == nil || mi < 0 || mi >= len(st.Models) {
		return time.Time{}
	}
	return st.Models[mi].StatusUntil
}
