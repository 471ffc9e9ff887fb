package targets

import (
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/clusterwire"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/messages"
)

// startCluster starts a targets actor and its cooldowns actor, on a
// member "node-a" whose members are members(the system's own address).
// A member at that address whose Self is false stands for a peer: what
// the actor sends it comes back to this very actor, through the same
// wire format a peer's actor receives.
func startCluster(t *testing.T, members func(self string) []Member) (*actor.ActorSystem, *clock.Fake, *Handle, *Cluster) {
	t.Helper()
	sys := testutil.ActorSystem(t)
	clk := clock.NewFake(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
	tg, err := SpawnWith(sys, []string{"p/a/m", "p/b/m"}, clk, Options{Jitter: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tg.Stop)
	ms := members(sys.Address())
	cl, err := tg.StartCluster(ClusterOptions{Self: "node-a", Members: func() []Member { return ms }})
	if err != nil {
		t.Fatal(err)
	}
	return sys, clk, tg, cl
}

// TestCooldownReachesThePeers: a cooldown the targets actor reports (a
// message to its cooldowns actor) goes to every member but this one as a
// SharedCooldown naming the target, with its end and reason, and the
// peer that receives it cools the target of that name: what the targets
// actor's callback carried before the link became a message.
func TestCooldownReachesThePeers(t *testing.T) {
	_, clk, tg, h := startCluster(t, func(self string) []Member {
		return []Member{
			{ID: "node-a", Address: "elsewhere:1", Self: true}, // never sent to
			{ID: "node-b", Address: self},                      // the peer: this actor again
		}
	})
	now := clk.Now()
	tg.Report(&messages.AttemptFinished{Target: 0, Class: messages.Capacity, Status: 503, Reason: "overloaded", Started: now, At: now})
	testutil.Until(t, "the cooldown told and heard back", func() bool {
		sent, heard, _ := h.Counts()
		return sent == 1 && heard == 1
	})
	s := tg.Snapshot().Targets[0]
	if !s.Open || s.CoolUntil.IsZero() || !s.CoolUntil.After(now) {
		t.Fatalf("target 0 after its failure: %+v", s)
	}
	if _, _, dropped := h.Counts(); dropped != 0 {
		t.Fatalf("%d cooldowns dropped", dropped)
	}
}

// TestPeerCooldownApplied: a peer's cooldown cools the target of that
// name here until its end, with the peer's reason and name; a cooldown
// beyond MaxPeerCooldown is capped by this member's clock; one already
// over, or for a target this member does not have, changes nothing and
// is not counted as heard; a message that is not a cooldown is dropped
// and counted.
func TestPeerCooldownApplied(t *testing.T) {
	sys, clk, tg, h := startCluster(t, func(string) []Member { return nil })
	now := clk.Now()
	send := func(m *messages.SharedCooldown) {
		w, err := clusterwire.Wrap(m)
		if err != nil {
			t.Fatal(err)
		}
		sys.Root.Send(h.pid, w)
		testutil.Drain(t, sys.Root, h.pid)
	}
	send(&messages.SharedCooldown{Target: "p/b/m", Until: now.Add(20 * time.Second).UnixMilli(), Reason: "rate_limit", From: "node-b"})
	testutil.Until(t, "target 1 cools", func() bool { return tg.Snapshot().Targets[1].Open })
	if s := tg.Snapshot().Targets[1]; !s.CoolUntil.Equal(now.Add(20*time.Second)) || s.CooldownReason != "rate_limit (from node-b)" {
		t.Fatalf("target 1 after the peer's cooldown: %+v", s)
	}
	send(&messages.SharedCooldown{Target: "p/a/m", Until: now.Add(5 * time.Hour).UnixMilli(), Reason: "quota", From: "node-c"})
	testutil.Until(t, "target 0 cools", func() bool { return tg.Snapshot().Targets[0].Open })
	if s := tg.Snapshot().Targets[0]; !s.CoolUntil.Equal(now.Add(MaxPeerCooldown)) {
		t.Fatalf("a peer's 5 h cooldown: until %v, want capped at %v", s.CoolUntil.Sub(now), MaxPeerCooldown)
	}
	send(&messages.SharedCooldown{Target: "p/c/m", Until: now.Add(time.Minute).UnixMilli(), Reason: "x", From: "node-b"})
	send(&messages.SharedCooldown{Target: "p/a/m", Until: now.Add(-time.Second).UnixMilli(), Reason: "x", From: "node-b"})
	sys.Root.Send(h.pid, wrapperspb.Bytes([]byte("not a cooldown")))
	testutil.Drain(t, sys.Root, h.pid)
	if sent, heard, dropped := h.Counts(); sent != 0 || heard != 2 || dropped != 1 {
		t.Fatalf("counts sent %d heard %d dropped %d, want 0, 2, 1", sent, heard, dropped)
	}
	if s := tg.Snapshot().Targets[0]; !strings.HasSuffix(s.CooldownReason, "(from node-c)") {
		t.Fatalf("a past cooldown changed target 0: %+v", s)
	}
}
