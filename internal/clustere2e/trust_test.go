package clustere2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/omniroute/gateway/actors/credit"
	icluster "github.com/omniroute/gateway/internal/cluster"
	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/internal/tenant"
	"github.com/omniroute/gateway/internal/testutil"
)

const (
	limitedKy = "sk-limited-tenant-0123456789"
	// limitedRPM is the limited tenant's requests per minute, cluster-wide.
	limitedRPM = 20
	// limitedDailyUSD is its daily spend budget (its model has no price:
	// the budget is there for its calendar grain, which the strangers
	// attack).
	limitedDailyUSD = 5
	// trustCap is the capped tenant's concurrency cap in the trust test.
	trustCap = 3
)

// etcdState is every key under /omniroute/ with its value and the
// revision that last wrote it.
func etcdState(t *testing.T, c *clientv3.Client) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, "/omniroute/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = fmt.Sprintf("%s @%d", kv.Value, kv.ModRevision)
	}
	return out
}

// TestStrangerOnTheRemotePort: two members, and two strangers that dial
// their remote ports as protoactor remotes: one plaintext, as the
// attacker's probe did, and one holding the cluster secret (so its TLS
// handshakes succeed) that is not a member.
//
//   - Control: while the keyed stranger is registered in etcd as a member,
//     its messages work (a cooldown spreads, a quota reading is heard,
//     grains activate and answer credit requests: a rolling grain grants
//     a token and takes it back by its stamp, a calendar grain answers
//     its own day and refuses a day it is not in; and it holds a
//     tenant's whole concurrency cap, so the tenant is refused on every
//     node). This proves the attack's messages are the ones members act
//     on.
//   - Removed: its etcd key deleted, it loses the lease: within about
//     credit.LeaseTTL the tenant is served again on every node while the
//     stranger keeps renewing.
//   - Attack: both strangers send each member an hour's cooldown of a
//     target, a quota reading, a PoisonPill for the cooldowns and quota
//     actors, grain activations, and credit requests to the real grains'
//     PIDs (learned in the control): a billion tokens acquired from the
//     provider's rolling budget (the wire carries no limit: the probe's
//     limit of 10^12 has no field to go in), a window of 2^40 for the
//     tenant's daily spend (the probe's poisoning), a billion requests
//     given back into every second of the tenant's request window, the
//     whole concurrency cap, and a call of the remote layer's
//     ListProcesses (on which protoactor's server panics, ending the
//     process). Nothing answers; etcd is unchanged; no member heard a
//     cooldown or a quota reading; every member serves the target and
//     the budgeted model; the tenant's rate limit (in any minute) and cap
//     hold; a real cooldown still spreads.
func TestStrangerOnTheRemotePort(t *testing.T) {
	etcdAddr := startEtcd(t)
	ec, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdAddr}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	exe := buildGateway(t)
	mock, mockAddr := startMock(t, map[string]mockprovider.Behavior{
		"m-budget":  {LatencyMS: 5, CompletionTokens: 20},
		"m-open":    {LatencyMS: 5, CompletionTokens: 5},
		"m-cool":    {LatencyMS: 5, CompletionTokens: 5},
		"m-capped":  {LatencyMS: 200, CompletionTokens: 5},
		"m-limited": {LatencyMS: 5, CompletionTokens: 5},
		"m-flaky":   {Fail: mockprovider.FailSpec{Mode: mockprovider.FailStatus, Status: 429, RetryAfter: "30"}},
	})
	cfgPath := testutil.WriteConfig(t, `{"providers": {"mock": {"base_url": "http://`+mockAddr+`/v1", "apis": ["chat"], "auth": "none",
	    "connections": {"budget": {"limits": {"tokens_per_minute": `+fmt.Sprint(budget)+`}}, "free": {}}}},
	  "models": {"budgeted": {"targets": [{"connection": "mock/budget", "model": "m-budget"}]},
	             "open": {"targets": [{"connection": "mock/free", "model": "m-open"}]},
	             "cool": {"targets": [{"connection": "mock/free", "model": "m-cool"}, {"connection": "mock/free", "model": "m-open"}]},
	             "capped": {"targets": [{"connection": "mock/free", "model": "m-capped"}]},
	             "limited": {"targets": [{"connection": "mock/free", "model": "m-limited"}]},
	             "flaky": {"targets": [{"connection": "mock/free", "model": "m-flaky"}, {"connection": "mock/free", "model": "m-open"}]}},
	  "tenants": [{"name": "capped", "key_env": "CAPPED_KEY", "max_concurrent": `+fmt.Sprint(trustCap)+`},
	              {"name": "limited", "key_env": "LIMITED_KEY", "requests_per_minute": `+fmt.Sprint(limitedRPM)+`,
	               "daily_budget_usd": `+fmt.Sprint(limitedDailyUSD)+`}],
	  "auth": {"mode": "open", "allow_anonymous": true}}`)
	ns := startCluster(t, exe, cfgPath, etcdAddr, 2, func(int) []string { return []string{"LIMITED_KEY=" + limitedKy} })
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}, Timeout: 30 * time.Second}
	mustServe := func(n *node, key, model string) {
		t.Helper()
		if a, err := chat(client, n.addr, key, model); err != nil || a.status != 200 {
			t.Fatalf("%s on %s: %+v %v", model, n.addr, a, err)
		}
	}
	for _, n := range ns {
		if m := n.health(t).Cluster.Trust.Mode; m != "secret" {
			t.Fatalf("a member's health says trust mode %q, want secret", m)
		}
		for _, m := range []struct{ key, model string }{{"", "open"}, {"", "budgeted"}, {cappedKy, "capped"}, {limitedKy, "limited"}} {
			serveEventually(t, client, n.addr, m.key, m.model)
		}
	}

	// The grains' identities: tenant ids are HMACs under the cluster's
	// install secret, which etcd holds.
	gr, err := ec.Get(context.Background(), icluster.InstallSecretKey("e2e"))
	if err != nil || len(gr.Kvs) != 1 {
		t.Fatalf("the cluster's install secret in etcd: %v %v", gr, err)
	}
	res, err := tenant.NewResolver(gr.Kvs[0].Value, tenant.ModeKeys, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Rolling budgets are "r/", calendar ones "w/", caps "s/"
	// (actors/credit).
	tokens := "r/ledger/mock/budget/m-budget/tokens"
	rpm := "r/tenant/" + res.IDForKey([]byte(limitedKy)).String() + "/requests"
	spend := "w/tenant/" + res.IDForKey([]byte(limitedKy)).String() + "/spend/day"
	conc := "s/tenant/" + res.IDForKey([]byte(cappedKy)).String() + "/concurrency"
	grains := []string{tokens, rpm, spend, conc}
	remoteOf := func(i int) string { return ns[i].health(t).Cluster.Address }
	owner := map[string]string{}
	for _, id := range grains {
		owner[id] = remoteOf(ownerOf(t, ns, id))
	}

	keyed := startStranger(t, "e2e", clusterSecret)
	plain := startStranger(t, "e2e", "")
	memberID := "e2e@" + keyed.id

	// Control: the keyed stranger as a member.
	key, val := keyed.memberRecord("e2e")
	if _, err := ec.Put(context.Background(), key, val); err != nil {
		t.Fatal(err)
	}
	for i, n := range ns {
		waitFor(t, fmt.Sprintf("node %d to list the stranger", i), func() bool { return len(n.health(t).Cluster.Members) == 3 })
	}
	var heardBefore []int64
	for i, n := range ns {
		h := n.health(t)
		heardBefore = append(heardBefore, h.Cluster.Cooldowns.Heard)
		keyed.do(t, strangerCmd{Op: "cooldown", Member: remoteOf(i), Target: "mock/free/m-cool", UntilMs: time.Now().Add(5 * time.Second).UnixMilli()})
		keyed.do(t, strangerCmd{Op: "quota", Member: remoteOf(i), Conn: "mock/free"})
	}
	for i, n := range ns {
		waitFor(t, fmt.Sprintf("node %d to hear the member's cooldown and quota reading", i), func() bool {
			h := n.health(t)
			return h.Cluster.Cooldowns.Heard == heardBefore[i]+1 && h.Cluster.Quota.Heard >= 1
		})
	}
	pids := map[string]string{}
	for _, id := range grains {
		o := keyed.do(t, strangerCmd{Op: "activate", Member: owner[id], Identity: id})
		if !o.Answered || o.PID == "" {
			t.Fatalf("a member's activation of %s was not answered: %+v", id, o)
		}
		pids[id] = o.PID
	}
	got := keyed.do(t, strangerCmd{Op: "credit", Member: owner[tokens], PID: pids[tokens], CreditOp: creditAcquire, Node: memberID, Amount: 1})
	if !got.Answered || got.Granted != 1 || got.At == 0 || got.Refused {
		t.Fatalf("a member's acquire of 1 token from the provider budget: %+v (the stranger's wire format must match actors/credit/wire.go)", got)
	}
	if o := keyed.do(t, strangerCmd{Op: "credit", Member: owner[tokens], PID: pids[tokens], CreditOp: creditRelease, Node: memberID,
		Backs: []strangerBack{{At: got.At, N: 1}}}); !o.Answered || o.Refused {
		t.Fatalf("a member's give-back of its token: %+v", o)
	}
	today := credit.PerDay.Index(time.Now())
	if o := keyed.do(t, strangerCmd{Op: "credit", Member: owner[spend], PID: pids[spend], CreditOp: creditAcquire, Node: memberID, Window: today}); !o.Answered || o.Refused || o.Left <= 0 {
		t.Fatalf("a member's call for today's spend budget: %+v", o)
	}
	if o := keyed.do(t, strangerCmd{Op: "credit", Member: owner[spend], PID: pids[spend], CreditOp: creditAcquire, Node: memberID, Window: 1 << 40, Amount: 1}); !o.Answered || !o.Refused || o.Granted != 0 {
		t.Fatalf("a member's acquire naming window 2^40 of the daily spend: %+v (the grain refuses a window its clock is not near)", o)
	}
	keyed.do(t, strangerCmd{Op: "hold", Member: owner[conc], PID: pids[conc], Node: memberID, Cap: trustCap})
	waitFor(t, "the member to hold the tenant's whole cap", func() bool { return keyed.do(t, strangerCmd{Op: "held"}).Held == trustCap })
	before := mock.Stats().Models["m-capped"].Requests
	for i, n := range ns {
		if a, err := chat(client, n.addr, cappedKy, "capped"); err != nil || a.status != 429 {
			t.Fatalf("node %d served the capped tenant while a member held its whole cap: %+v %v", i, a, err)
		}
	}
	if got := mock.Stats().Models["m-capped"].Requests - before; got != 0 {
		t.Fatalf("the mock got %d capped requests while a member held the cap", got)
	}

	// Removed: the stranger's member key is deleted; it keeps renewing.
	var refusedBefore []int64
	for _, n := range ns {
		refusedBefore = append(refusedBefore, n.health(t).Cluster.Trust.Refused)
	}
	removed := time.Now()
	if _, err := ec.Delete(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	for i, n := range ns {
		waitFor(t, fmt.Sprintf("node %d to drop the removed member", i), func() bool { return len(n.health(t).Cluster.Members) == 2 })
	}
	for i, n := range ns {
		waitFor(t, fmt.Sprintf("node %d to serve the capped tenant again", i), func() bool {
			a, err := chat(client, n.addr, cappedKy, "capped")
			return err == nil && a.status == 200
		})
	}
	regained := time.Since(removed)
	// Documented: the removed member's renewals are dropped, so its slots
	// return when its lease ends at the grain (credit.LeaseTTL after its
	// last accepted renewal). 15 s bounds a lease that never ends.
	if regained > 15*time.Second {
		t.Fatalf("the capped tenant was served again %s after its holder was removed", regained)
	}
	if h := ns[ownerIndex(t, ns, owner[conc])].health(t); h.Cluster.Trust.Refused <= refusedBefore[ownerIndex(t, ns, owner[conc])] {
		t.Fatal("the grain's member counted no refused message from the removed member, which renews every 250 ms")
	}
	t.Logf("a member holding the whole cap was removed: the tenant was served again on both nodes after %s (the lease is %s)", regained.Round(10*time.Millisecond), credit.LeaseTTL)

	// Attack, from both strangers.
	stateBefore := etcdState(t, ec)
	var heard, quotaHeard, refused []int64
	for _, n := range ns {
		h := n.health(t)
		heard, quotaHeard, refused = append(heard, h.Cluster.Cooldowns.Heard), append(quotaHeard, h.Cluster.Quota.Heard), append(refused, h.Cluster.Trust.Refused)
	}
	var attack []strangerCmd
	for i := range ns {
		m := remoteOf(i)
		attack = append(attack,
			strangerCmd{Op: "cooldown", Member: m, Target: "mock/free/m-open", UntilMs: time.Now().Add(time.Hour).UnixMilli()},
			strangerCmd{Op: "quota", Member: m, Conn: "mock/free"},
			strangerCmd{Op: "poison", Member: m, Actor: "omniroute-cooldowns"},
			strangerCmd{Op: "poison", Member: m, Actor: "omniroute-quota"},
			strangerCmd{Op: "listprocesses", Member: m})
	}
	for _, id := range grains {
		attack = append(attack, strangerCmd{Op: "activate", Member: owner[id], Identity: id})
	}
	// A billion requests given back at every second of the last minute:
	// to a member, the grain would free every slot of the window (60
	// give-backs, within the 64 one message may carry).
	var backs []strangerBack
	for i := range int64(60) {
		backs = append(backs, strangerBack{At: time.Now().Add(-time.Duration(i) * time.Second).UnixNano(), N: 1e9})
	}
	credits := []strangerCmd{
		{CreditOp: creditAcquire, PID: pids[tokens], Member: owner[tokens], Amount: 1e9},
		{CreditOp: creditAcquire, PID: pids[spend], Member: owner[spend], Window: 1 << 40, Amount: 1},
		{CreditOp: creditRelease, PID: pids[rpm], Member: owner[rpm], Backs: backs},
		{CreditOp: creditAcquire, PID: pids[conc], Member: owner[conc], Window: 0, Amount: trustCap},
	}
	for _, c := range credits {
		c.Op, c.Node = "credit", memberID
		attack = append(attack, c)
	}
	// Both at once: each runs its commands concurrently and answers when
	// every one has been answered or timed out.
	plain.send(t, strangerCmd{Op: "all", All: attack})
	keyed.send(t, strangerCmd{Op: "all", All: attack})
	for _, s := range []struct {
		name string
		s    *stranger
	}{{"plaintext", plain}, {"keyed", keyed}} {
		for k, o := range s.s.next(t).All {
			if o.Answered {
				t.Errorf("the %s stranger's %s was answered: %+v", s.name, attack[k].Op, o)
			}
		}
	}
	time.Sleep(500 * time.Millisecond) // let anything that got through land
	stateAfter := etcdState(t, ec)
	for k, v := range stateAfter {
		if stateBefore[k] != v {
			t.Errorf("etcd's %s changed during the attack: %q, was %q", k, v, stateBefore[k])
		}
	}
	if len(stateAfter) != len(stateBefore) {
		t.Errorf("etcd held %d keys before the attack and %d after", len(stateBefore), len(stateAfter))
	}
	for i, n := range ns {
		h := n.health(t)
		if h.Cluster.Cooldowns.Heard != heard[i] || h.Cluster.Quota.Heard != quotaHeard[i] {
			t.Errorf("node %d heard %d cooldowns and %d quota readings during the attack", i, h.Cluster.Cooldowns.Heard-heard[i], h.Cluster.Quota.Heard-quotaHeard[i])
		}
		if h.Cluster.Trust.Refused <= refused[i] {
			t.Errorf("node %d's gate counted nothing refused from the keyed stranger", i)
		}
		for _, tg := range h.Targets.Targets {
			if tg.Target == "mock/free/m-open" && tg.Circuit != "closed" {
				t.Errorf("node %d's target %s is %s (%s) after the attack", i, tg.Target, tg.Circuit, tg.CooldownReason)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Every member serves: the target the strangers tried to cool for an
	// hour, and the model whose budget they tried to poison.
	openBefore, budgetBefore := mock.Stats().Models["m-open"].Completed, mock.Stats().Models["m-budget"].Completed
	for _, n := range ns {
		mustServe(n, "", "open")
		mustServe(n, "", "budgeted")
	}
	if st := mock.Stats().Models; st["m-open"].Completed-openBefore != int64(len(ns)) || st["m-budget"].Completed-budgetBefore != int64(len(ns)) {
		t.Fatalf("the mock completed %d open and %d budgeted requests, want %d each", st["m-open"].Completed-openBefore, st["m-budget"].Completed-budgetBefore, len(ns))
	}
	// The limited tenant, offered far more than its budget on both nodes,
	// is served at most its budget in the run's minute (the strangers gave
	// a billion back into it; its warm-up in the same rolling minute
	// counts too); the capped tenant has at most its cap in flight.
	limitedOK, cappedOK := offerBoth(t, client, ns, 3*time.Second, sender{limitedKy, "limited", true}, sender{cappedKy, "capped", true})
	st := mock.Stats().Models
	t.Logf("after the attack: the limited tenant was served %d of %d a minute; the capped tenant %d, at most %d in flight (cap %d)",
		limitedOK, limitedRPM, cappedOK, st["m-capped"].MaxInflight, trustCap)
	if limitedOK > limitedRPM || limitedOK == 0 {
		t.Fatalf("the limited tenant was served %d requests within a minute; its limit is %d a minute", limitedOK, limitedRPM)
	}
	if st["m-capped"].MaxInflight > trustCap || cappedOK == 0 {
		t.Fatalf("the capped tenant: %d in flight at most, %d served; its cap is %d", st["m-capped"].MaxInflight, cappedOK, trustCap)
	}
	// The cooldowns actors the strangers sent a PoisonPill still run: a
	// real cooldown on node 0 reaches node 1.
	if a, err := chat(client, ns[0].addr, "", "flaky"); err != nil || a.status != 200 {
		t.Fatalf("the flaky model on node 0: %+v %v", a, err)
	}
	waitFor(t, "node 1 to hear node 0's cooldown", func() bool {
		for _, tg := range ns[1].health(t).Targets.Targets {
			if tg.Target == "mock/free/m-flaky" && strings.Contains(tg.CooldownReason, "(from ") {
				return true
			}
		}
		return false
	})
}

// ownerIndex is the index of the node whose remote address is addr.
func ownerIndex(t *testing.T, ns []*node, addr string) int {
	t.Helper()
	for i, n := range ns {
		if n.health(t).Cluster.Address == addr {
			return i
		}
	}
	t.Fatalf("no node at %s", addr)
	return -1
}
