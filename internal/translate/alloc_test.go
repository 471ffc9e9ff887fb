//go:build !race

package translate

import (
	"testing"

	"github.com/omniroute/gateway/internal/dialect"
)

// TestAllocStreamEvents: translating a content event on a warmed-up
// translator allocates nothing, for every upstream dialect.
func TestAllocStreamEvents(t *testing.T) {
	for _, be := range benchEvents {
		tr := primed(t, be.from, be.to, be.prime)
		out := make([]byte, 0, 4096)
		n := testing.AllocsPerRun(200, func() {
			var err error
			if out, err = tr.Event(out[:0], &be.event); err != nil {
				t.Fatal(err)
			}
			tr.st.acc = tr.st.acc[:0]
		})
		if n != 0 {
			t.Errorf("%s: %.1f allocations per event, want 0", be.name, n)
		}
	}
}

// TestAllocRequests: a request translated by a reused translator into a
// reused buffer allocates nothing (field paths are built only for errors).
func TestAllocRequests(t *testing.T) {
	body := agentChatBody()
	for _, to := range []dialect.ID{dialect.Messages, dialect.Responses} {
		tr := New(dialect.Chat, to, Options{Model: "m"})
		out, err := tr.Request(nil, body)
		if err != nil {
			t.Fatal(err)
		}
		n := testing.AllocsPerRun(20, func() {
			tr.Reset(dialect.Chat, to, Options{Model: "m"})
			if out, err = tr.Request(out[:0], body); err != nil {
				t.Fatal(err)
			}
		})
		if n != 0 {
			t.Errorf("chat→%s: %.1f allocations per request, want 0", to, n)
		}
	}
}
