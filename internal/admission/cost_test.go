package admission

import "testing"

func TestCostVectors(t *testing.T) {
	c := DefaultCost()
	for _, tc := range []struct {
		name string
		f    Features
		want int64
	}{
		{"nothing", Features{}, 1},
		{"a Claude Code turn: 80 KB, 25 tools", Features{InputTokens: 80_000 / 4}, 1},
		{"2 MiB", Features{InputTokens: 2 << 20 / 4}, 1},
		{"n = 3", Features{Fanout: 3}, 3},
		{"saturates by fan-out", Features{Fanout: 1 << 40}, 1024},
	} {
		if got := c.Cost(tc.f); got != tc.want {
			t.Errorf("default: %s: cost %d, want %d", tc.name, got, tc.want)
		}
	}
	// Priced by context, for a provider bound by cache memory.
	c.TokensPerUnit = 32768
	for _, tc := range []struct {
		name string
		f    Features
		want int64
	}{
		{"nothing", Features{}, 1},
		{"a small chat", Features{InputTokens: 500}, 1},
		{"a Claude Code turn: 80 KB, 25 tools", Features{InputTokens: 80_000 / 4}, 1},
		{"just under a unit of context", Features{InputTokens: 32767}, 1},
		{"one unit of context", Features{InputTokens: 32768}, 2},
		{"a long session's 500 KB", Features{InputTokens: 500_000 / 4}, 4},
		{"2 MiB", Features{InputTokens: 2 << 20 / 4}, 17},
		{"fan-out below 1 counts 1", Features{Fanout: -3}, 1},
		{"n = 3", Features{Fanout: 3}, 3},
		{"n = 3 with context", Features{InputTokens: 40000, Fanout: 3}, 6},
		{"negative tokens count 0", Features{InputTokens: -5}, 1},
		{"saturates", Features{InputTokens: 1 << 40}, 1024},
		{"saturates by fan-out", Features{Fanout: 1 << 40}, 1024},
		{"saturates by product", Features{InputTokens: 32768 * 100, Fanout: 100}, 1024},
	} {
		if got := c.Cost(tc.f); got != tc.want {
			t.Errorf("%s: cost %d, want %d", tc.name, got, tc.want)
		}
	}
	small := c
	small.MaxRequestCost = 2
	if got := small.Cost(Features{InputTokens: 1 << 40}); got != 2 {
		t.Errorf("over max: %d, want 2", got)
	}
}

// TestChargeCapsBigRequests: however large, a request holds at most a
// quarter of its upstream's limit, so it fits once that much is free.
func TestChargeCapsBigRequests(t *testing.T) {
	for _, tc := range []struct{ cost, limit, want int64 }{
		{1, 16, 1}, {4, 16, 4}, {17, 16, 4}, {17, 1, 1}, {1000, 3, 1}, {5, 100, 5}, {0, 16, 1},
	} {
		if got := ChargeFor(tc.cost, tc.limit); got != tc.want {
			t.Errorf("ChargeFor(%d, %d) = %d, want %d", tc.cost, tc.limit, got, tc.want)
		}
	}
}
