package credit

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

// rollingCall makes one call to a rolling grain of host h and reads its
// answer.
func rollingCall(t *testing.T, h *grainHost, key string, r messages.CreditRequest) messages.CreditReply {
	t.Helper()
	return grainCall(t, h, rollingPrefix+key, r)
}

// grainCall makes one call to grain id of host h and reads its answer.
func grainCall(t *testing.T, h *grainHost, id string, r messages.CreditRequest) messages.CreditReply {
	t.Helper()
	v, err := h.Request(id, KindName, mustRequest(t, &r))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := decodeReply(v)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestRollingRetryIsAppliedOnce: a call sent again with the same Seq (its
// answer was lost) gets the first answer and changes nothing: a grant is
// not made twice and a give-back not taken twice (which would free
// another node's credit and let the cluster spend past the limit); an
// older call arriving after a newer one is refused; another node's
// numbers are its own.
func TestRollingRetryIsAppliedOnce(t *testing.T) {
	key := uniq("test/roll-retry")
	setBudget(key, Budget{Windows: minute(10)})
	first := rollingCall(t, host, key, messages.CreditRequest{Op: messages.CreditAcquire, Node: "a", Amount: 4, Seq: 1})
	if first.Granted != 4 || first.Left != 6 {
		t.Fatalf("first grant %+v", first)
	}
	again := rollingCall(t, host, key, messages.CreditRequest{Op: messages.CreditAcquire, Node: "a", Amount: 4, Seq: 1})
	if again.Granted != 4 || again.At != first.At || again.Left != 6 {
		t.Fatalf("the retry of the grant: %+v, want the first answer (%+v) and nothing charged again", again, first)
	}
	// Another node takes 4 in the same slot: a give-back taken twice
	// would free it.
	if b := rollingCall(t, host, key, messages.CreditRequest{Op: messages.CreditAcquire, Node: "b", Amount: 4, Seq: 1}); b.Granted != 4 || b.Left != 2 {
		t.Fatalf("node b's grant %+v", b)
	}
	back := messages.CreditRequest{Op: messages.CreditRelease, Node: "a", Seq: 2, Backs: []messages.CreditBack{{At: first.At, N: 4}}}
	if rep := rollingCall(t, host, key, back); rep.Left != 6 {
		t.Fatalf("a's give-back: %+v, want 6 left", rep)
	}
	if rep := rollingCall(t, host, key, back); rep.Refused || rep.Left != 6 {
		t.Fatalf("the retry of a's give-back: %+v, want 6 left (b's 4 still counted)", rep)
	}
	if rep := rollingCall(t, host, key, messages.CreditRequest{Op: messages.CreditAcquire, Node: "a", Amount: 4, Seq: 1}); !rep.Refused || rep.Granted != 0 {
		t.Fatalf("a's first call arriving after its second: %+v, want refused", rep)
	}
	// Without a Seq (a node's last give-back at shutdown) every call is
	// applied.
	if rep := rollingCall(t, host, key, messages.CreditRequest{Op: messages.CreditAcquire, Node: "c", Amount: 1}); rep.Granted != 1 || rep.Left != 5 {
		t.Fatalf("a call without Seq: %+v", rep)
	}
	if rep := rollingCall(t, host, key, messages.CreditRequest{Op: messages.CreditAcquire, Node: "c", Amount: 1}); rep.Granted != 1 || rep.Left != 4 {
		t.Fatalf("a second call without Seq: %+v", rep)
	}
}

// landedThenFailed is a store whose next Save writes the record and then
// reports a failure, as an etcd write does when its deadline passes after
// the transaction committed.
type landedThenFailed struct {
	*MemStore
	mu     sync.Mutex
	failed int
	armed  bool
}

func (s *landedThenFailed) Save(ctx context.Context, key string, r Record, version int64) (int64, error) {
	v, err := s.MemStore.Save(ctx, key, r, version)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.armed {
		s.armed = false
		s.failed++
		return 0, errors.New("writing budget record: context deadline exceeded")
	}
	return v, err
}

// TestLandedWriteIsNotGrantedTwice: the grain's write of a grant lands
// but reports a failure, so the grain answers Unavailable; the node sends
// the call again and gets that grant, rather than a second one beside a
// first that nobody holds. What the grain counts as out is what the node
// was granted.
func TestLandedWriteIsNotGrantedTwice(t *testing.T) {
	st := &landedThenFailed{MemStore: NewMemStore(), armed: true}
	sys := testutil.ActorSystem(t)
	h := &grainHost{sys: sys, props: grainProps(st, clk, budgets), pids: map[string]*actor.PID{}}
	l, err := Start(testutil.ActorSystem(t), h, Options{Node: "flaky-store-node", Clock: clk, Interval: tickEvery})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
	const limit = 40
	key := uniq("test/roll-landed")
	setBudget(key, Budget{Windows: minute(limit)})
	p := l.Rolling(key, minute(limit))
	waitFor(t, "a grant after the failed write", func() bool { return p.granted.Load() > 0 })
	st.mu.Lock()
	failed := st.failed
	st.mu.Unlock()
	if failed != 1 {
		t.Fatalf("%d writes failed after landing, want 1: the test proves nothing", failed)
	}
	if l.failures.Load() == 0 {
		t.Fatal("the node saw no failed call")
	}
	// Another node's look at the windows (asking for nothing).
	rep := rollingCall(t, h, key, messages.CreditRequest{Op: messages.CreditAcquire, Node: "observer"})
	if out := limit - rep.Left; out != p.granted.Load() {
		t.Fatalf("the grain counts %d out, the node was granted %d: a grant nobody holds", out, p.granted.Load())
	}
}
