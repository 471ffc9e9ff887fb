package admission

import "testing"

func TestCostVectors(t *testing.T) {
	c := DefaultCost()
	for _, tc := range []struct {
		name string
		f    Features
		want int64
	}{
		{"nothing, non-streaming", Features{}, 4},
		{"nothing, streaming", Features{Streaming: true}, 3},
		{"one body quantum", Features{BodyBytes: 16384}, 5},
		{"just over one quantum", Features{BodyBytes: 16385}, 6},
		{"tokens", Features{EstimatedTokens: 1025}, 6},
		{"messages", Features{Messages: 33}, 6},
		{"tools", Features{Tools: 9}, 6},
		{"64 tools price per quantum", Features{Tools: 64}, 12},
		{"65 tools saturate", Features{Tools: 65}, 1000},
		{"fan-out below 1 counts 1", Features{Fanout: -3}, 4},
		{"fan-out", Features{Fanout: 3}, 6},
		{"negative features count 0", Features{BodyBytes: -1, EstimatedTokens: -5, Messages: -1}, 4},
		{"typical chat", Features{BodyBytes: 2000, EstimatedTokens: 500, Messages: 4, Streaming: true}, 6},
		{"saturates", Features{BodyBytes: 16384 * 2000}, 1000},
		{"saturates exactly", Features{BodyBytes: 16384 * 996}, 1000},
	} {
		if got := c.Cost(tc.f); got != tc.want {
			t.Errorf("%s: cost %d, want %d", tc.name, got, tc.want)
		}
	}
	small := c
	small.MaxRequestCost = 2
	if got := small.Cost(Features{}); got != 2 {
		t.Errorf("base above max: %d, want 2", got)
	}
}
