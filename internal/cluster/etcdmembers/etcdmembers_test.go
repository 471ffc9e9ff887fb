package etcdmembers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/internal/testutil/etcdtest"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func rec(id string) record {
	return record{ID: id, Host: "127.0.0.1", Port: 7000, Kinds: []string{"k"}}
}

func js(r record) []byte { b, _ := json.Marshal(r); return b }

// TestView: the list published from what etcd holds.
func TestView(t *testing.T) {
	a, b, self := rec("c@a"), rec("c@b"), rec("c@self")
	cases := []struct {
		name       string
		values     [][]byte
		self       record
		last       []record
		keepAbsent bool
		want       []string
	}{
		{"the members etcd lists, and this one", [][]byte{js(a), js(b)}, self, nil, false, []string{"c@a", "c@b", "c@self"}},
		{"this member even when etcd lost its key", nil, self, nil, false, []string{"c@self"}},
		{"a client is not in its own list", [][]byte{js(a)}, record{}, nil, false, []string{"c@a"}},
		{"what is not a member record is skipped", [][]byte{[]byte("{"), []byte(`{"host":"x"}`), js(a)}, self, nil, false, []string{"c@a", "c@self"}},
		{"a vanished member leaves", [][]byte{js(a)}, self, []record{a, b, self}, false, []string{"c@a", "c@self"}},
		{"a vanished member stays while etcd was away a moment ago", [][]byte{js(a)}, self, []record{a, b, self}, true, []string{"c@a", "c@b", "c@self"}},
		{"a new record replaces the old one", [][]byte{js(record{ID: "c@a", Host: "10.0.0.9", Port: 1})}, self, []record{a}, true, []string{"c@a", "c@self"}},
	}
	for _, c := range cases {
		last := map[string]record{}
		for _, r := range c.last {
			last[r.ID] = r
		}
		got := view(c.values, c.self, last, c.keepAbsent)
		var ids []string
		for id := range got {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		if !slices.Equal(ids, c.want) {
			t.Fatalf("%s: got %v, want %v", c.name, ids, c.want)
		}
		if c.name == "a new record replaces the old one" && got["c@a"].Host != "10.0.0.9" {
			t.Fatalf("%s: kept the old record %+v", c.name, got["c@a"])
		}
	}
}

// startEtcd runs a one-member etcd on loopback and returns a client of
// it; both stop with the test.
func startEtcd(t *testing.T) *clientv3.Client {
	t.Helper()
	e := etcdtest.Start(t)
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Addr()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// sink records the lists a provider publishes.
type sink struct {
	mu   sync.Mutex
	last []string
}

func (s *sink) publish(ms pcluster.Members) {
	ids := make([]string, 0, len(ms))
	for _, m := range ms {
		ids = append(ids, m.Id)
	}
	s.mu.Lock()
	s.last = ids
	s.mu.Unlock()
}

func (s *sink) ids() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.last)
}

func member(t *testing.T, c *clientv3.Client, id string, clk clock.Clock) (*Provider, *sink) {
	t.Helper()
	p := New(c, "/test/members", Options{TTL: time.Second, Retry: 50 * time.Millisecond, Resync: 100 * time.Millisecond, Clock: clk})
	s := &sink{}
	p.publish, p.log = s.publish, slog.New(slog.NewTextHandler(io.Discard, nil))
	p.setSelf("c", rec(id))
	if err := p.startMember(); err != nil {
		t.Fatal(err)
	}
	return p, s
}

func waitIDs(t *testing.T, s *sink, want ...string) {
	t.Helper()
	testutil.Until(t, fmt.Sprintf("the published list %v", want), func() bool { return slices.Equal(s.ids(), want) })
}

// TestMembersThroughEtcd: two members on a real etcd see each other; one
// that leaves is dropped at once, except within the grace after etcd was
// unreachable, when it stays until the grace has passed on the clock.
func TestMembersThroughEtcd(t *testing.T) {
	c := startEtcd(t)
	clk := clock.NewFake(time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC))
	a, sa := member(t, c, "c@a", clk)
	defer func() { _ = a.Shutdown(true) }()
	b, sb := member(t, c, "c@b", clk)
	waitIDs(t, sa, "c@a", "c@b")
	waitIDs(t, sb, "c@a", "c@b")
	if err := b.Shutdown(true); err != nil {
		t.Fatalf("b's shutdown: %v", err)
	}
	waitIDs(t, sa, "c@a") // b deleted its key: gone at once

	b2, _ := member(t, c, "c@b2", clk)
	waitIDs(t, sa, "c@a", "c@b2")
	a.fail(errors.New("etcd unreachable (a test)"))
	if err := b2.Shutdown(true); err != nil {
		t.Fatalf("b2's shutdown: %v", err)
	}
	// Several resyncs run while etcd no longer lists b2: it stays listed.
	time.Sleep(500 * time.Millisecond)
	if got := sa.ids(); !slices.Equal(got, []string{"c@a", "c@b2"}) {
		t.Fatalf("within the grace after an etcd failure the list is %v; b2 should stay", got)
	}
	if a.GetHealthStatus() != nil {
		t.Fatal("a successful read after the failure left the health error in place")
	}
	clk.Advance(a.o.Grace)
	waitIDs(t, sa, "c@a")
}
