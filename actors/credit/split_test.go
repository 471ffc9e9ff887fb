package credit

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/testutil"
)

// TestTwoActivationsOfAGrainGrantTheLimitOnce: members that disagree on
// who owns a grain each activate their own (protoactor's placement allows
// it while member lists differ). Two nodes, each talking only to its own
// activation of the same budgets over one store, spend a rolling and a
// calendar budget of 100 as fast as they can: together they never take
// more than 100, and they take most of it.
func TestTwoActivationsOfAGrainGrantTheLimitOnce(t *testing.T) {
	const limit = 100
	var nodes [2]*Leases
	for i := range nodes {
		// Each node's own view: its own activation of every identity,
		// on the grain host's system and store.
		view := &grainHost{sys: host.sys, props: host.props, pids: map[string]*actor.PID{}}
		sys := testutil.NewActorSystem()
		l, err := Start(sys, view, Options{Node: fmt.Sprintf("split-%d", i), Clock: clk, Interval: tickEvery})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = l
		t.Cleanup(func() {
			l.Stop()
			sys.Shutdown()
			view.mu.Lock()
			for _, pid := range view.pids {
				_ = host.sys.Root.PoisonFuture(pid).Wait()
			}
			view.mu.Unlock()
		})
	}
	for _, kind := range []string{"rolling", "calendar"} {
		t.Run(kind, func(t *testing.T) {
			key := uniq("test/split-" + kind)
			pools := make([]*Pool, len(nodes))
			for i, l := range nodes {
				if kind == "rolling" {
					setBudget(key, Budget{Windows: minute(limit)})
					pools[i] = l.Rolling(key, minute(limit))
				} else {
					setBudget(key, Budget{Limit: limit, Period: PerMinute})
					pools[i] = l.Window(key, limit)
				}
			}
			var total atomic.Int64
			var stop atomic.Bool
			var wg sync.WaitGroup
			for _, p := range pools {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for !stop.Load() {
						if _, ok, _ := p.Take(clk.Now(), 1); ok {
							total.Add(1)
						} else {
							time.Sleep(time.Millisecond)
						}
					}
				}()
			}
			waitFor(t, "the nodes to spend most of the budget", func() bool { return total.Load() >= limit*3/4 })
			// Until each node has its own activation's word that the
			// budget is spent: with the clock still, neither gets more.
			waitFor(t, "both nodes to hear the budget is spent", func() bool {
				for _, p := range pools {
					if _, said := p.Word(clk.Now()); !said {
						return false
					}
				}
				return true
			})
			stop.Store(true)
			wg.Wait()
			if got := total.Load(); got > limit {
				t.Fatalf("two activations of one %s budget of %d granted %d between them", kind, limit, got)
			}
		})
	}
}
