package credit

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"go.uber.org/goleak"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/rolling"
	"github.com/omniroute/gateway/internal/testutil"
)

// The unit tests host the grains on a plain actor system behind a
// Requester that places each identity on one activation, as disthash does
// across members. They do not start protoactor's cluster: its remote
// layer sets gRPC's global logger without a lock on every start, so
// several members in one process race under -race (docs/cluster.md); the
// real cluster is tested with one member per process
// (internal/clustere2e).

// grainHost activates one grain per identity and forwards requests to it.
type grainHost struct {
	sys   *actor.ActorSystem
	props *actor.Props
	mu    sync.Mutex
	pids  map[string]*actor.PID
	calls int
}

func (h *grainHost) Request(identity, kind string, msg any, _ ...pcluster.GrainCallOption) (any, error) {
	if kind != KindName {
		return nil, fmt.Errorf("unknown kind %q", kind)
	}
	h.mu.Lock()
	pid := h.pids[identity]
	if pid == nil {
		pid = h.sys.Root.Spawn(h.props)
		h.sys.Root.Send(pid, &pcluster.ClusterInit{Identity: pcluster.NewClusterIdentity(identity, kind)})
		h.pids[identity] = pid
	}
	h.calls++
	h.mu.Unlock()
	return h.sys.Root.RequestFuture(pid, msg, 2*time.Second).Result()
}

// deactivate stops identity's grain, as when its member dies: the next
// request activates a fresh one.
func (h *grainHost) deactivate(t *testing.T, identity string) {
	t.Helper()
	h.mu.Lock()
	pid := h.pids[identity]
	delete(h.pids, identity)
	h.mu.Unlock()
	if pid == nil {
		t.Fatalf("grain %s has no activation", identity)
	}
	if err := h.sys.Root.PoisonFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
}

// member is one node: its own actor system and lease actor.
type member struct {
	sys    *actor.ActorSystem
	leases *Leases
}

var (
	host    *grainHost
	members [3]*member
	// clk is the clock of every pool and grain: fixed in the middle of a
	// window so that no test crosses a minute boundary, and advanced by
	// the tests that need leases to expire.
	clk   = clock.NewFake(time.Date(2026, 3, 1, 12, 0, 20, 0, time.UTC))
	store = NewMemStore()
	// budgets are the grains' budgets, as every node's configuration
	// would say them: a test registers each key it uses (setBudget).
	budgets   = &Budgets{}
	budgetMap sync.Map // key → Budget
)

// setBudget registers key's budget with the grains' nodes.
func setBudget(key string, b Budget) { budgetMap.Store(key, b) }

// window is member i's pool of a calendar budget of limit a minute.
func window(i int, key string, limit int64) *Pool {
	setBudget(key, Budget{Limit: limit, Period: PerMinute})
	return members[i].leases.Window(key, limit)
}

// slotPool is member i's pool of a concurrency cap.
func slotPool(i int, key string, limit int64) *Pool {
	setBudget(key, Budget{Limit: limit})
	return members[i].leases.Slots(key, limit)
}

// rollingPool is member i's pool of a rolling budget.
func rollingPool(i int, key string, windows [rolling.NumPeriods]int64) *Pool {
	setBudget(key, Budget{Windows: windows})
	return members[i].leases.Rolling(key, windows)
}

func TestMain(m *testing.M) {
	sys := testutil.NewActorSystem()
	budgets.Set(func(key string) (Budget, bool) {
		b, ok := budgetMap.Load(key)
		if !ok {
			return Budget{}, false
		}
		return b.(Budget), true
	})
	host = &grainHost{sys: sys, props: grainProps(store, clk, budgets), pids: map[string]*actor.PID{}}
	for i := range members {
		s := testutil.NewActorSystem()
		l, err := Start(s, host, Options{Node: fmt.Sprintf("node-%d", i), Clock: clk, Interval: tickEvery})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		members[i] = &member{sys: s, leases: l}
	}
	code := m.Run()
	for _, mb := range members {
		mb.leases.Stop()
		mb.sys.Shutdown()
	}
	sys.Shutdown()
	if code == 0 {
		// A grain answer that arrives after its lease actor stopped is a
		// dead letter; protoactor's dead-letter throttle keeps a goroutine
		// for its one-second interval after it.
		opts := append(testutil.LeakOptions(), goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
		if err := goleak.Find(opts...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// tickEvery is the lease actors' tick here (on the wall clock: see
// Leases' tick).
const tickEvery = 20 * time.Millisecond

// waitFor polls cond until it holds (testutil.Until: a bound for a stuck
// actor, not a timing assertion).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Until(t, what, cond)
}
