package pressure

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/clock"
	mem "github.com/omniroute/gateway/internal/pressure"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func sample(goRatio float64) mem.Sample {
	return mem.Sample{GoUsed: int64(goRatio * 1000), GoLimit: 1000, CgroupCurrent: -1, CgroupFile: -1, CgroupMax: -1, CgroupHigh: -1, OOM: -1, OOMKill: -1, PSISome: -1, PSIFull: -1}
}

type syncBuf = testutil.SyncBuffer

func waitState(t *testing.T, h *Handle, cond func(*mem.State) bool) *mem.State {
	t.Helper()
	var s *mem.State
	testutil.Until(t, "the state matches", func() bool {
		s = h.State()
		return cond(s)
	})
	return s
}

func TestSamplesDriveSeverityAndSubscribers(t *testing.T) {
	sys := testutil.ActorSystem(t)
	clk := clock.NewFake(time.Unix(500, 0))
	var mu sync.Mutex
	next := sample(0.1)
	logs := &syncBuf{}
	h, err := Spawn(sys, Options{Config: mem.DefaultConfig(), Clock: clk, Manual: true,
		Sample: func() mem.Sample { mu.Lock(); defer mu.Unlock(); return next },
		Log:    slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	if st := h.State(); st == nil || st.Severity != mem.Normal || !st.ObservedAt.Equal(clk.Now()) {
		t.Fatalf("the first sample is taken at spawn: %+v", st)
	}
	inbox := testutil.NewInbox(t, sys)
	h.Subscribe(inbox.PID)
	set := func(s mem.Sample) { mu.Lock(); next = s; mu.Unlock() }
	set(sample(0.95))
	h.Tick()
	clk.Advance(time.Second)
	h.Tick()
	st := waitState(t, h, func(s *mem.State) bool { return s.Severity == mem.Critical })
	if st.Reason != mem.ReasonGoHeap || !strings.Contains(logs.String(), "goRatio=0.95") {
		t.Fatalf("state %+v, logs %s", st, logs.String())
	}
	h.Observe(sample(0.2))
	waitState(t, h, func(s *mem.State) bool { return s.Severity == mem.Normal })
	testutil.Drain(t, sys.Root, h.pid) // the last sample's message is sent
	var seen []mem.Severity
	for _, m := range testutil.Of[*messages.Published[*mem.State]](t, inbox) {
		seen = append(seen, m.Snapshot.Severity)
	}
	if len(seen) != 3 || seen[0] != mem.Normal || seen[1] != mem.Critical || seen[2] != mem.Normal {
		t.Fatalf("subscriber saw %v", seen)
	}
	if !strings.Contains(logs.String(), "memory pressure recovered") {
		t.Fatalf("logs %s", logs.String())
	}
}

func TestTimerSamplesEveryInterval(t *testing.T) {
	sys := testutil.ActorSystem(t)
	var mu sync.Mutex
	n := 0
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h, err := Spawn(sys, Options{Config: mem.DefaultConfig(), Interval: 5 * time.Millisecond, Clock: clk,
		Sample: func() mem.Sample { mu.Lock(); n++; mu.Unlock(); return sample(0.1) }})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	testutil.Until(t, "the sampling timer armed", func() bool { return clk.Pending() == 1 })
	for i := 0; i < 4; i++ {
		clk.Advance(5 * time.Millisecond) // one interval of the actor's clock: one sample
	}
	testutil.Until(t, "four samples", func() bool { mu.Lock(); defer mu.Unlock(); return n >= 4 })
}

func TestInvalidThresholds(t *testing.T) {
	sys := testutil.ActorSystem(t)
	cfg := mem.DefaultConfig()
	cfg.HighRatio = 0.99
	if _, err := Spawn(sys, Options{Config: cfg, Manual: true}); err == nil || !strings.Contains(err.Error(), "ratios") {
		t.Fatalf("err %v", err)
	}
}

func TestRealSystemSample(t *testing.T) {
	sys := testutil.ActorSystem(t)
	h, err := Spawn(sys, Options{Config: mem.DefaultConfig(), Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	if st := h.State(); st.Sample.GoUsed <= 0 {
		t.Fatalf("the Go runtime figure is always readable: %+v", st.Sample)
	}
	h2, err := Spawn(sys, Options{Config: mem.DefaultConfig(), Manual: true, GoLimitFallback: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Stop()
	if st := h2.State(); mem.GoMemoryLimit() < 0 && st.Sample.GoLimit != 1<<40 {
		t.Fatalf("without GOMEMLIMIT the fallback limit applies: %+v", st.Sample)
	}
}
