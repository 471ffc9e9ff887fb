package pressure

import (
	"testing"
	"time"
)

func TestParseCPUStat(t *testing.T) {
	for _, tc := range []struct {
		in          string
		busy, total int64
	}{
		{"cpu  100 5 50 800 45 0 0 0 7 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n", 155, 1000}, // idle and iowait are not busy; guest is in user
		{"cpu 1 2 3 4 5", 6, 15},
		{"cpu 1 2 3 4 5 6 7 8 9 10 11 12", 27, 36}, // past steal: guest time, already counted
		{"cpu0 1 2 3 4 5\n", -1, -1},
		{"cpu 1 2 3", -1, -1},
		{"cpu 1 x 3 4 5", -1, -1},
		{"cpu 1 -2 3 4 5", -1, -1},
		{"", -1, -1},
	} {
		if b, tot := ParseCPUStat([]byte(tc.in)); b != tc.busy || tot != tc.total {
			t.Errorf("%q: %d of %d, want %d of %d", tc.in, b, tot, tc.busy, tc.total)
		}
	}
}

// TestCPUSaturation: the state's CPU shares come from two samples'
// counters; the machine's CPUs used up (by anyone), or the cgroup
// throttled, is saturation.
func TestCPUSaturation(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	tr := NewTracker(DefaultConfig())
	s := Sample{GoUsed: 1, GoLimit: -1, CgroupCurrent: -1, CgroupFile: -1, CgroupMax: -1, CgroupHigh: -1, OOM: -1, OOMKill: -1,
		PSISome: -1, PSIFull: -1, CPUBusy: 1000, CPUTotal: 4000, CgroupCPUUsage: -1, CgroupThrottled: 0}
	if st := tr.Observe(s, at); st.CPUBusy != -1 || st.CPUSaturated() {
		t.Fatalf("first sample: busy %v (nothing to compare with), saturated %v", st.CPUBusy, st.CPUSaturated())
	}
	for _, tc := range []struct {
		name                     string
		busy, total, throttledUs int64
		wantBusy, wantThrottled  float64
		saturated                bool
	}{
		{"half busy", 100, 200, 0, 0.5, 0, false},
		{"used up, whoever used it: latency is no evidence", 190, 200, 0, 0.95, 0, true},
		{"an idle host, the cgroup held back by its quota", 20, 200, 200_000, 0.1, 0.2, true},
		{"a throttled counter going back is unknown", 10, 200, -1_000_000, 0.05, -1, false},
		{"so is a busy counter going back", -500, 200, 0, -1, -1, false},
	} {
		s.CPUBusy += tc.busy
		s.CPUTotal += tc.total
		s.CgroupThrottled += tc.throttledUs
		at = at.Add(time.Second)
		st := tr.Observe(s, at)
		if st.CPUBusy != tc.wantBusy || st.CPUThrottled != tc.wantThrottled || st.CPUSaturated() != tc.saturated {
			t.Errorf("%s: busy %v throttled %v saturated %v, want %v %v %v", tc.name,
				st.CPUBusy, st.CPUThrottled, st.CPUSaturated(), tc.wantBusy, tc.wantThrottled, tc.saturated)
		}
	}
}
