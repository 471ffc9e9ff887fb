package quota

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/clusterwire"
	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/internal/rendezvous"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

// pair is two members' quota handles on one actor system, their cluster
// actors routed to each other by name (the remote layer's part is
// transport's; what crosses is the same encoded BytesValue).
type pair struct {
	h  [2]*Handle
	cl [2]*Cluster
	// members is each member's view; a test swaps it to change membership.
	members [2]atomic.Pointer[[]Member]
	full    [2][]Member // each member's view when both list both
}

func startPair(t *testing.T, sys *actor.ActorSystem, specs []ConnSpec, clk clock.Clock) *pair {
	return startPairWith(t, sys, specs, clk, nil)
}

// started is closed, per test, once its pair's cluster actors are both
// spawned.
var started sync.Map // *testing.T → chan struct{}

func pairStarted(t *testing.T) chan struct{} {
	ch, _ := started.LoadOrStore(t, make(chan struct{}))
	return ch.(chan struct{})
}

// startPairWith starts the pair with view(i, list) as member i's first
// member list (nil: both list both).
func startPairWith(t *testing.T, sys *actor.ActorSystem, specs []ConnSpec, clk clock.Clock, view func(i int, ms []Member) []Member) *pair {
	t.Helper()
	p := &pair{}
	names := [2]string{"quota-peer-a", "quota-peer-b"}
	for i := range p.h {
		h, err := Spawn(sys, specs, clk, Options{SharedPolls: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(h.Stop)
		p.h[i] = h
		ms := []Member{{ID: "e2e@a", Address: "a", Self: i == 0}, {ID: "e2e@b", Address: "b", Self: i == 1}}
		p.full[i] = ms
		if view != nil {
			ms = view(i, ms)
		}
		p.members[i].Store(&ms)
	}
	for i := range p.h {
		i := i
		cl, err := p.h[i].StartCluster(ClusterOptions{Name: names[i], CheckInterval: 20 * time.Millisecond,
			Members: func() []Member { return *p.members[i].Load() },
			PID: func(m Member) *actor.PID {
				if m.Address == "a" {
					return actor.NewPID(sys.Address(), names[0])
				}
				return actor.NewPID(sys.Address(), names[1])
			}})
		if err != nil {
			t.Fatal(err)
		}
		p.cl[i] = cl
	}
	close(pairStarted(t))
	t.Cleanup(func() { started.Delete(t) })
	return p
}

func tokensObs(at time.Time, remaining float64) *messages.QuotaObservation {
	obs := &messages.QuotaObservation{N: 1, At: at}
	obs.Readings[0] = messages.QuotaReading{Dimension: messages.DimTokens, Flags: messages.HasLimit | messages.HasRemaining | messages.HasReset,
		Limit: 10000, Remaining: remaining, ResetAt: at.Add(time.Minute), Window: time.Minute}
	return obs
}

// TestPeerHeadersMergeAsLocalOnes: a header observation made on member A
// changes B's state of the connection exactly as the same observation
// made on a lone node does; B, which made none itself, sends nothing back
// (no echo). An older observation from a peer loses to the fresher one
// B holds; a fresher one wins.
func TestPeerHeadersMergeAsLocalOnes(t *testing.T) {
	sys := testutil.ActorSystem(t)
	clk := clock.NewFake(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	m, _ := quota.Family("openai")
	specs := []ConnSpec{{Provider: "openai", Name: "openai/main", Models: []string{"gpt-4o", "gpt-4o-mini"}, Mapping: m}}
	p := startPair(t, sys, specs, clk)
	lone, err := Spawn(sys, specs, clk, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lone.Stop()

	t0 := clk.Now()
	clk.Advance(5 * time.Second) // the observations below are all in the past
	p.h[0].Observe(0, "gpt-4o", tokensObs(t0, 0))
	lone.Observe(0, "gpt-4o", tokensObs(t0, 0))
	want := waitState(t, lone, 0, func(s *ConnState) bool { return s.Models[0].Status == quota.StatusExhausted })
	got := waitState(t, p.h[1], 0, func(s *ConnState) bool { return s.Models[0].Status == quota.StatusExhausted })
	if !reflect.DeepEqual(normalise(got.Models), normalise(want.Models)) || got.Status != want.Status || !reflect.DeepEqual(got.Sources, want.Sources) {
		t.Fatalf("the peer's state differs from a local observation's:\n got %+v\nwant %+v", got.Models, want.Models)
	}
	if rt := p.h[1].Recovery(0, 0); !rt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("the peer's exhausted state holds until %v, want the reset %v", rt, t0.Add(time.Minute))
	}
	if s := p.cl[0].Stats(); s.Sent != 1 || s.Heard != 0 {
		t.Fatalf("member A: %+v, want one batch sent and nothing heard", s)
	}
	// B's flush ticks come and go without an echo: three ticks, then B's
	// header adapter, B's cluster actor and A's have handled all they
	// were sent.
	for range 3 {
		clk.Advance(HeaderFlushInterval)
	}
	testutil.Drain(t, sys.Root, (*p.h[1].conns.At(0)).header.Load(), p.cl[1].pid, p.cl[0].pid)
	if s := p.cl[1].Stats(); s.Heard != 1 || s.Sent != 0 {
		t.Fatalf("member B: %+v, want one batch heard and none sent (a peer's reading is never passed on)", s)
	}

	// B observes itself, later: healthy. A's older observation (taken
	// before B's, arriving after) loses; A's fresher one wins.
	t1 := t0.Add(2 * time.Second)
	p.h[1].Observe(0, "gpt-4o", tokensObs(t1, 9000))
	waitTicking(t, p.h[1], 0, clk, HeaderFlushInterval, func(s *ConnState) bool { return s.Models[0].Status == quota.StatusHealthy })
	p.h[0].Observe(0, "gpt-4o", tokensObs(t0.Add(time.Second), 0))
	// A marker after it on the same path (A's header adapter, both
	// cluster actors, B's header adapter, each in order): once B shows
	// it, B has handled the stale observation too.
	p.h[0].Observe(0, "gpt-4o-mini", tokensObs(t1, 0))
	s := waitTicking(t, p.h[1], 0, clk, HeaderFlushInterval, func(s *ConnState) bool { return s.Models[1].Status == quota.StatusExhausted })
	if s.Models[0].Status != quota.StatusHealthy || s.Models[0].Values[0].Remaining != 9000 {
		t.Fatalf("an older peer observation replaced a fresher local one: %+v", s.Models[0])
	}
	p.h[0].Observe(0, "gpt-4o", tokensObs(t1.Add(time.Second), 100))
	waitTicking(t, p.h[1], 0, clk, HeaderFlushInterval, func(s *ConnState) bool {
		return s.Models[0].Status == quota.StatusApproaching && s.Models[0].Values[0].Remaining == 100
	})
}

// normalise drops the monotonic and location parts of times, which a
// value that crossed the wire does not keep.
func normalise(ms []ModelState) []ModelState {
	out := make([]ModelState, len(ms))
	for i, m := range ms {
		m.Until, m.StatusUntil = m.Until.UTC(), m.StatusUntil.UTC()
		vals := make([]quota.Value, len(m.Values))
		for j, v := range m.Values {
			v.ResetAt, v.Expires = v.ResetAt.UTC(), v.Expires.UTC()
			vals[j] = v
		}
		m.Values = vals
		out[i] = m
	}
	return out
}

// polledConnection is a DeepSeek connection named name whose usage API
// is a test server counting its polls (it stops with the test).
//
// The provider answers only once the test's pair is started (startPair
// opens it): a reading shared while the other member's cluster actor is
// still being spawned reaches a PID protoactor has registered but whose
// mailbox it has not finished setting up (a data race inside protoactor's
// spawn, seen under -race). Across processes, the remote layer stands
// between them.
func polledConnection(t *testing.T, name string) (*atomic.Int32, []ConnSpec) {
	polls := &atomic.Int32{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-pairStarted(t):
		case <-r.Context().Done():
			return
		}
		polls.Add(1)
		w.Write([]byte(`{"is_available":true,"balance_infos":[{"currency":"USD","total_balance":"0.00"}]}`))
	}))
	t.Cleanup(srv.Close)
	return polls, []ConnSpec{{Provider: "deepseek", Name: name, Models: []string{"deepseek-chat"},
		Poll: &PollSpec{Kind: quota.PollDeepSeek, BaseURL: srv.URL, Interval: time.Hour, APIKey: "sk-secret-123"}}}
}

// TestOnePollerPerConnection: of two members, only the connection's
// owner polls; the other shows the owner's reading as provider_api. When
// the owner leaves the member list, the survivor starts polling at its
// next check.
func TestOnePollerPerConnection(t *testing.T) {
	polls, specs := polledConnection(t, "deepseek/main")
	sys := testutil.ActorSystem(t)
	clk := clock.NewFake(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	p := startPair(t, sys, specs, clk)
	for i := range p.h {
		waitState(t, p.h[i], 0, func(s *ConnState) bool {
			return s.Status == quota.StatusExhausted && len(s.Values) == 1 && s.Values[0].Source == quota.SourceProviderAPI
		})
	}
	owner := -1
	for i := range p.cl {
		if ps := p.cl[i].Stats().Polling; len(ps) == 1 && ps[0] == "deepseek/main" {
			if owner >= 0 {
				t.Fatal("both members poll the connection")
			}
			owner = i
		}
	}
	if owner < 0 {
		t.Fatal("no member polls the connection")
	}
	// Several checks later, still one poller and one poll (interval
	// 1 h): the other member's state came from the owner's.
	for range 5 {
		clk.Advance(20 * time.Millisecond) // CheckInterval
		testutil.Drain(t, sys.Root, p.cl[0].pid, p.cl[1].pid)
	}
	if n, ps := polls.Load(), p.cl[1-owner].Stats().Polling; n != 1 || len(ps) != 0 {
		t.Fatalf("%d polls by two members, the other polling %v; want 1 poll by the owner alone", n, ps)
	}
	other := 1 - owner
	if s := p.cl[other].Stats(); s.Heard != 1 {
		t.Fatalf("the other member heard %+v", s)
	}
	// The owner leaves: the survivor sees only itself and takes over.
	alone := []Member{{ID: []string{"e2e@a", "e2e@b"}[other], Self: true}}
	p.members[other].Store(&alone)
	testutil.Until(t, "the survivor to poll", func() bool {
		clk.Advance(20 * time.Millisecond) // its next check
		return polls.Load() == 2 && len(p.cl[other].Stats().Polling) == 1
	})
}

// TestWireRoundTripAndRejects: a poll reading survives the wire (values,
// error, observation time), and what a member cannot read (the JSON of the
// release before, another kind, a malformed batch) is dropped, counted and
// never applied.
func TestWireRoundTripAndRejects(t *testing.T) {
	at := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	in := quota.Reading{Source: quota.SourceProviderAPI, Supported: true, Err: "GET /key: status 500", Values: []quota.Value{
		{Dimension: messages.DimCredits, Flags: quota.HasLimit | quota.HasRemaining, Limit: 20, Remaining: 15, Unit: "USD",
			Source: quota.SourceProviderAPI, Confidence: quota.ConfidenceAuthoritative, Expires: at.Add(time.Minute)}}}
	p := encodePoll("openrouter/main", in, at)
	p.From = "e2e@a"
	v, err := clusterwire.Wrap(p)
	if err != nil {
		t.Fatal(err)
	}
	m, err := clusterwire.Unwrap(v)
	if err != nil {
		t.Fatal(err)
	}
	out, gotAt := pollReading(m.(*messages.SharedQuotaPoll))
	out.Values[0].Expires = out.Values[0].Expires.UTC()
	if !gotAt.Equal(at) || !reflect.DeepEqual(out, in) {
		t.Fatalf("round trip:\n got %+v at %v\nwant %+v at %v", out, gotAt, in, at)
	}

	long := encodePoll("c", quota.Reading{Err: strings.Repeat("é", messages.MaxClusterString)}, at)
	long.From = "e2e@a"
	if _, err := clusterwire.Wrap(long); err != nil || len(long.Err) > messages.MaxClusterString {
		t.Fatalf("a long poll error (%d bytes) kept the reading off the wire: %v", len(long.Err), err)
	}

	sys := testutil.ActorSystem(t)
	clk := clock.NewFake(at)
	h, err := Spawn(sys, []ConnSpec{{Provider: "openrouter", Name: "openrouter/main", Models: []string{"m"}}}, clk, Options{SharedPolls: true})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	self := []Member{{ID: "e2e@b", Self: true}}
	cl, err := h.StartCluster(ClusterOptions{Members: func() []Member { return self }, Name: "quota-rejects"})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := clusterwire.Wrap(&messages.SharedCooldown{Target: "t", From: "e2e@a"})
	bad := []*wrapperspb.BytesValue{
		{Value: []byte(`{"conn":"openrouter/main","from":"e2e@a","poll":{"at":1,"values":[]}}`)}, // the release before
		other,
		{Value: append(bytes.Clone(v.Value), 0)},
	}
	for _, b := range bad {
		sys.Root.Send(cl.pid, b)
	}
	sys.Root.Send(cl.pid, v) // a good one behind them: once it is heard, the bad ones were handled
	testutil.Until(t, "the good message to be heard", func() bool { return cl.Stats().Heard == 1 })
	if s := cl.Stats(); s.Dropped != int64(len(bad)) {
		t.Fatalf("stats %+v, want %d dropped", s, len(bad))
	}
	if n := cl.refusals.Count(); n != int64(len(bad)) {
		t.Fatalf("%d refusals noted, want %d", n, len(bad))
	}
}

// TestPeerPollFreshestWins: a poll reading heard from a peer replaces the
// one held only when it was taken later; an older one (from a member that
// still polled during a handover) loses.
func TestPeerPollFreshestWins(t *testing.T) {
	sys := testutil.ActorSystem(t)
	clk := clock.NewFake(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	h, err := Spawn(sys, []ConnSpec{{Provider: "deepseek", Name: "deepseek/main", Models: []string{"deepseek-chat"},
		Poll: &PollSpec{Kind: quota.PollDeepSeek, BaseURL: "http://127.0.0.1:1", Interval: time.Hour}}}, clk, Options{SharedPolls: true})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	t0 := clk.Now()
	clk.Advance(5 * time.Second) // the readings below are all in the past
	balance := func(left float64) quota.Reading {
		return quota.Reading{Source: quota.SourceProviderAPI, Supported: true, Values: []quota.Value{{Dimension: messages.DimCurrency,
			Flags: quota.HasRemaining, Remaining: left, Unit: "USD", Source: quota.SourceProviderAPI, Confidence: quota.ConfidenceAuthoritative,
			Expires: t0.Add(time.Hour)}}}
	}
	agg := (*h.conns.At(0)).live.Load()
	h.root.Send(agg, &peerPoll{reading: balance(0), at: t0.Add(2 * time.Second)})
	waitState(t, h, 0, func(s *ConnState) bool { return s.Status == quota.StatusExhausted })
	h.root.Send(agg, &peerPoll{reading: balance(5), at: t0.Add(time.Second)})
	// AddModels is answered after the aggregator handled what was sent
	// before it: the older reading has been seen by then.
	if err := h.AddModels(0, []string{"deepseek-reasoner"}); err != nil {
		t.Fatal(err)
	}
	if s := h.State(0); s.Status != quota.StatusExhausted || s.Values[0].Remaining != 0 {
		t.Fatalf("an older poll reading replaced a fresher one: %+v", s.Values)
	}
	h.root.Send(agg, &peerPoll{reading: balance(0.5), at: t0.Add(3 * time.Second)})
	s := waitState(t, h, 0, func(s *ConnState) bool { return s.Status == quota.StatusHealthy })
	if s.Values[0].Remaining != 0.5 {
		t.Fatalf("remaining %v, want 0.5 from the freshest poll", s.Values[0].Remaining)
	}
	// SharedPolls without ownership: this member never polled (its poll
	// of a closed port would have left an error).
	if s.Error != "" || len(s.Sources) != 1 || s.Sources[0] != "provider_api" {
		t.Fatalf("this member polled: error %q, sources %v", s.Error, s.Sources)
	}
}

// TestPeerClockAhead: a peer whose clock runs an hour ahead sends a poll
// reading and a header batch "from the future"; they count as observed
// now, with their reset and expiry the same distance from it, and a peer
// whose clock lags, or leads by less than maxPeerLead, keeps its times.
func TestPeerClockAhead(t *testing.T) {
	now := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	ahead := now.Add(time.Hour)
	poll := &messages.SharedQuotaPoll{Conn: "c", From: "p", At: ahead.UnixNano(),
		Values: []messages.SharedQuotaValue{{Expires: ahead.Add(10 * time.Minute).UnixNano(), ResetAt: ahead.Add(time.Minute).UnixNano()}, {}}}
	headers := &messages.SharedQuotaHeaders{Conn: "c", From: "p", Observations: []messages.SharedQuotaObservation{
		{At: ahead.UnixNano(), Readings: []messages.SharedQuotaReading{{ResetAt: ahead.Add(30 * time.Second).UnixNano()}}},
		{At: now.Add(-time.Minute).UnixNano(), Readings: []messages.SharedQuotaReading{{ResetAt: now.UnixNano()}}},
		{At: now.Add(maxPeerLead / 2).UnixNano()}}}
	fromTheFuture(poll, now)
	fromTheFuture(headers, now)
	r, at := pollReading(poll)
	if !at.Equal(now) || !r.Values[0].Expires.Equal(now.Add(10*time.Minute)) || !r.Values[0].ResetAt.Equal(now.Add(time.Minute)) {
		t.Fatalf("poll from the future: at %v, expires %v, reset %v", at, r.Values[0].Expires, r.Values[0].ResetAt)
	}
	if !r.Values[1].Expires.IsZero() || !r.Values[1].ResetAt.IsZero() {
		t.Fatalf("an unknown expiry or reset became a time: %+v", r.Values[1])
	}
	obs := decodeHeaders(headers.Observations)
	if !obs[0].Obs.At.Equal(now) || !obs[0].Obs.Readings[0].ResetAt.Equal(now.Add(30*time.Second)) {
		t.Fatalf("headers from the future: at %v, reset %v", obs[0].Obs.At, obs[0].Obs.Readings[0].ResetAt)
	}
	if !obs[1].Obs.At.Equal(now.Add(-time.Minute)) || !obs[1].Obs.Readings[0].ResetAt.Equal(now) {
		t.Fatalf("a lagging peer's headers were moved: at %v", obs[1].Obs.At)
	}
	if !obs[2].Obs.At.Equal(now.Add(maxPeerLead / 2)) {
		t.Fatalf("a lead within maxPeerLead was corrected: at %v", obs[2].Obs.At)
	}
}

// TestJoiningMemberHearsTheLastHeaders: a header observation made while
// member A was alone reaches member B when it joins, without a new
// response.
func TestJoiningMemberHearsTheLastHeaders(t *testing.T) {
	sys := testutil.ActorSystem(t)
	clk := clock.NewFake(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	m, _ := quota.Family("openai")
	specs := []ConnSpec{{Provider: "openai", Name: "openai/main", Models: []string{"gpt-4o"}, Mapping: m}}
	p := startPairWith(t, sys, specs, clk, func(i int, ms []Member) []Member {
		if i == 0 {
			return []Member{ms[0]}
		}
		return []Member{}
	})
	p.h[0].Observe(0, "gpt-4o", tokensObs(clk.Now(), 0))
	waitState(t, p.h[0], 0, func(s *ConnState) bool { return s.Models[0].Status == quota.StatusExhausted })
	// A's batch went to no peer. B joins: both list both.
	p.members[1].Store(&p.full[1])
	p.members[0].Store(&p.full[0])
	waitTicking(t, p.h[1], 0, clk, 20*time.Millisecond, func(s *ConnState) bool { return s.Models[0].Status == quota.StatusExhausted })
}

// TestJoiningMemberHearsTheLastPoll: a member that joins gets the poll
// reading the owner holds at the owner's next check, without a new poll
// (it would otherwise wait up to a poll interval).
func TestJoiningMemberHearsTheLastPoll(t *testing.T) {
	const name = "deepseek/main"
	polls, specs := polledConnection(t, name)
	sys := testutil.ActorSystem(t)
	clk := clock.NewFake(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	owner := 0
	if rendezvous.Owner(name, []string{"e2e@a", "e2e@b"}) == "e2e@b" {
		owner = 1
	}
	other := 1 - owner
	// Before: the owner alone in its list; the other not even in its own
	// (not joined yet), so it polls nothing.
	p := startPairWith(t, sys, specs, clk, func(i int, ms []Member) []Member {
		if i == owner {
			return []Member{ms[owner]}
		}
		return []Member{}
	})
	waitState(t, p.h[owner], 0, func(s *ConnState) bool { return s.Status == quota.StatusExhausted })
	if s := p.h[other].State(0); s.Status != quota.StatusUnknown {
		t.Fatalf("the member not yet joined has state %s", s.Status)
	}
	// It joins: both list both.
	p.members[other].Store(&p.full[other])
	p.members[owner].Store(&p.full[owner])
	waitTicking(t, p.h[other], 0, clk, 20*time.Millisecond, func(s *ConnState) bool {
		return s.Status == quota.StatusExhausted && s.Values[0].Source == quota.SourceProviderAPI
	})
	if n := polls.Load(); n != 1 {
		t.Fatalf("%d polls; the joining member should have heard the owner's only one (owner %d, stats %+v %+v)", n, owner, p.cl[0].Stats(), p.cl[1].Stats())
	}
}
