//go:build !race

package translate

import (
	"testing"

	"github.com/omniroute/gateway/internal/dialect"
)

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
