package rendezvous

import (
	"fmt"
	"testing"
)

func keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("provider%d/conn%d", i%7, i)
	}
	return out
}

// TestOwnerIsOneMemberAndDeterministic: every key has exactly one owner,
// a member of the list, the same whatever the list's order, and keys
// spread over all members.
func TestOwnerIsOneMemberAndDeterministic(t *testing.T) {
	ids := []string{"e2e@a1", "e2e@b2", "e2e@c3"}
	rev := []string{"e2e@c3", "e2e@a1", "e2e@b2"}
	count := map[string]int{}
	for _, k := range keys(3000) {
		o := Owner(k, ids)
		if o != Owner(k, rev) || o != Owner(k, ids) {
			t.Fatalf("key %q: owner depends on the order of members", k)
		}
		found := false
		for _, id := range ids {
			found = found || id == o
		}
		if !found {
			t.Fatalf("key %q: owner %q is not a member", k, o)
		}
		count[o]++
	}
	for _, id := range ids {
		// 1000 expected each; a skewed hash would leave one far off.
		if c := count[id]; c < 800 || c > 1200 {
			t.Fatalf("member %s owns %d of 3000 keys: %v", id, c, count)
		}
	}
	if Owner("x", nil) != "" {
		t.Fatal("an owner without members")
	}
	if Owner("x", []string{"only"}) != "only" {
		t.Fatal("a single member does not own everything")
	}
}

// TestOwnerStableWhenAMemberJoinsOrLeaves: a fourth member takes about a
// quarter of the keys, and every key that moves moves to it; when a
// member leaves only its own keys move.
func TestOwnerStableWhenAMemberJoinsOrLeaves(t *testing.T) {
	three := []string{"e2e@a1", "e2e@b2", "e2e@c3"}
	four := append([]string{"e2e@d4"}, three...)
	moved := 0
	ks := keys(4000)
	for _, k := range ks {
		before, after := Owner(k, three), Owner(k, four)
		if before != after {
			moved++
			if after != "e2e@d4" {
				t.Fatalf("key %q moved from %s to %s, not to the member that joined", k, before, after)
			}
		}
	}
	if moved < 800 || moved > 1200 {
		t.Fatalf("%d of %d keys moved when a fourth member joined; want about a quarter", moved, len(ks))
	}
	two := three[1:]
	for _, k := range ks {
		if before := Owner(k, three); before != "e2e@a1" && Owner(k, two) != before {
			t.Fatalf("key %q moved from %s though only e2e@a1 left", k, before)
		}
	}
}

// TestWeightsStay: the weights of known pairs are the ones computed
// before the hash helpers were shared with Score, so a cluster that
// upgrades keeps its quota pollers where they were.
func TestWeightsStay(t *testing.T) {
	if w := weight("n1@a", "prov0/conn0"); w != 0xf17566c0fb2ac280 {
		t.Fatalf("weight(n1@a, prov0/conn0) = %x", w)
	}
	if w := weight("n1@a", "prov1/conn1"); w != 0x936bd4992c9c844f {
		t.Fatalf("weight(n1@a, prov1/conn1) = %x", w)
	}
}
