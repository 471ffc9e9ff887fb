package ringbuf

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestEvictsOldestWithinBudget(t *testing.T) {
	// Each 10-byte line costs 50; a 200-byte budget holds 4.
	b := New(200)
	for i := 0; i < 10; i++ {
		b.Push(Stdout, fmt.Sprintf("line-%04d", i)+"x", t0)
	}
	if b.Len() != 4 || b.Bytes() != 200 {
		t.Fatalf("len %d bytes %d; want 4 lines, 200 bytes", b.Len(), b.Bytes())
	}
	got := b.Tail(100, "")
	if got[0].Line != "line-0006x" || got[3].Line != "line-0009x" || got[3].Seq != 10 {
		t.Fatalf("kept %+v; want lines 6..9", got)
	}
}

func TestOversizedLineKeptAlone(t *testing.T) {
	b := New(100)
	b.Push(Stdout, "small", t0)
	big := strings.Repeat("x", 500)
	b.Push(Stderr, big, t0)
	if b.Len() != 1 || b.Tail(5, "")[0].Line != big {
		t.Fatalf("want only the big line, got %d lines", b.Len())
	}
	b.Push(Stdout, "after", t0)
	if b.Len() != 1 || b.Tail(5, "")[0].Line != "after" {
		t.Fatalf("the big line should be evicted by the next one")
	}
}

func TestDefaultCapacity(t *testing.T) {
	if New(0).Capacity() != 5<<20 {
		t.Fatal("default capacity is not 5 MiB")
	}
}

func TestTailAndFilter(t *testing.T) {
	b := New(0)
	for i, l := range []string{"Starting up", "ERROR disk full", "ready", "error: retry", "done"} {
		s := Stdout
		if i%2 == 1 {
			s = Stderr
		}
		b.Push(s, l, t0.Add(time.Duration(i)*time.Second))
	}
	cases := []struct {
		n      int
		filter string
		want   []string
	}{
		{2, "", []string{"error: retry", "done"}},
		{10, "error", []string{"ERROR disk full", "error: retry"}},
		{1, "ERROR", []string{"error: retry"}},
		{0, "", nil},
		{5, "nothing", nil},
	}
	for _, tc := range cases {
		var got []string
		for _, l := range b.Tail(tc.n, tc.filter) {
			got = append(got, l.Line)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("Tail(%d,%q) = %q; want %q", tc.n, tc.filter, got, tc.want)
		}
	}
}

func TestSubscribeNoGapNoDuplicate(t *testing.T) {
	b := New(0)
	b.Push(Stdout, "a1", t0)
	b.Push(Stdout, "b1", t0)
	snap, sub := b.Subscribe(10, "a", 8)
	defer sub.Close()
	if len(snap) != 1 || snap[0].Line != "a1" {
		t.Fatalf("snapshot %+v", snap)
	}
	b.Push(Stdout, "b2", t0)
	b.Push(Stderr, "a2", t0)
	select {
	case l := <-sub.C():
		if l.Line != "a2" || l.Stream != Stderr {
			t.Fatalf("live line %+v; want a2 on stderr", l)
		}
	default:
		t.Fatal("no live line delivered")
	}
	if b.Subscribers() != 1 {
		t.Fatal("subscriber not counted")
	}
	sub.Close()
	sub.Close()
	if _, ok := <-sub.C(); ok || b.Subscribers() != 0 {
		t.Fatal("Close did not end the subscription")
	}
}

func TestSlowSubscriberDropsInsteadOfBlocking(t *testing.T) {
	b := New(0)
	_, sub := b.Subscribe(0, "", 2)
	defer sub.Close()
	for i := 0; i < 5; i++ {
		b.Push(Stdout, "x", t0) // must not block
	}
	if sub.Dropped() != 3 || len(sub.C()) != 2 {
		t.Fatalf("dropped %d queued %d; want 3 and 2", sub.Dropped(), len(sub.C()))
	}
}

func BenchmarkPush(b *testing.B) {
	buf := New(1 << 20)
	line := strings.Repeat("x", 120)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		buf.Push(Stdout, line, t0)
	}
}
