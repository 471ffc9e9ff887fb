package procstat

import (
	"os"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func TestParseStat(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want time.Duration
		err  bool
	}{
		{"plain", "123 (omniroute) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 9 0", 3 * time.Second, false},
		{"name with spaces and parens", "7 (a) b (c)) R 1 2 3 4 5 6 7 8 9 10 1 2 0 0", 30 * time.Millisecond, false},
		{"short", "7 (x) R 1 2", 0, true},
		{"no name", "7 x R", 0, true},
		{"not numbers", "7 (x) R 1 2 3 4 5 6 7 8 9 10 a b 0 0", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStat([]byte(tc.in))
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("parseStat(%q) = %v, %v; want %v, err=%v", tc.in, got, err, tc.want, tc.err)
			}
		})
	}
}

func TestParseStatus(t *testing.T) {
	m, err := parseStatus([]byte("Name:\tx\nVmHWM:\t   20480 kB\nVmRSS:\t   10240 kB\nThreads: 4\n"))
	if err != nil || m.RSS != 10<<20 || m.HWM != 20<<20 {
		t.Fatalf("got %+v, %v", m, err)
	}
	if _, err := parseStatus([]byte("Name:\tx\nVmRSS:\t 1 kB\n")); err == nil {
		t.Fatal("missing VmHWM accepted")
	}
	if _, err := parseStatus([]byte("VmRSS:\t 1 MB\nVmHWM:\t 1 kB\n")); err == nil {
		t.Fatal("wrong unit accepted")
	}
}

// TestOwnProcess reads this test process: the CPU time /proc reports
// follows the kernel's own accounting (getrusage) within its 10 ms tick,
// and the resident set is plausible. It spins until the process has used
// 100 ms of CPU rather than for a fixed wall time: on a busy machine the
// same wall time may buy far less CPU (the old version asserted a third
// of wall time and failed there).
func TestOwnProcess(t *testing.T) {
	pid := os.Getpid()
	before, err := CPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	self0 := SelfCPU()
	give := time.Now().Add(60 * time.Second)
	x := 0
	for SelfCPU()-self0 < 100*time.Millisecond && time.Now().Before(give) {
		for i := 0; i < 1e5; i++ {
			x++
		}
	}
	after, err := CPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	used := SelfCPU() - self0
	if used < 100*time.Millisecond {
		t.Fatalf("the process got only %v of CPU in a minute (x=%d)", used, x)
	}
	// The two reads bracket each other; procfs counts whole ticks at each
	// end, and other goroutines (GC) run between the reads.
	if got := after - before; got < used-30*time.Millisecond || got > used+30*time.Millisecond {
		t.Fatalf("procfs counted %v of CPU where getrusage counted %v", got, used)
	}
	m, err := ReadMemory(pid)
	if err != nil || m.RSS < 1<<20 || m.HWM < m.RSS {
		t.Fatalf("memory %+v, %v", m, err)
	}
	s := StartSampler([]int{pid, -1}, 10*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	peak, mean := s.Stop()
	if peak[0] < 1<<20 || mean[0] < 1<<20 || peak[1] != 0 {
		t.Fatalf("sampler peak %v mean %v", peak, mean)
	}
}

func TestParseMachine(t *testing.T) {
	m, err := parseMachine([]byte("cpu  100 5 50 800 45 0 0 0 7 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Busy != 1550*time.Millisecond || m.Total != 10*time.Second {
		t.Fatalf("busy %v total %v, want 1.55s of 10s (idle 800 and iowait 45 are not busy; guest is in user)", m.Busy, m.Total)
	}
	next := Machine{Busy: m.Busy + time.Second, Total: m.Total + 2*time.Second}
	if s := next.BusyShare(m); s != 0.5 {
		t.Fatalf("share %v, want 0.5", s)
	}
	for _, bad := range []string{"", "intr 1 2 3\n", "cpu 1 x 3 4 5\n"} {
		if _, err := parseMachine([]byte(bad)); err == nil {
			t.Fatalf("%q parsed", bad)
		}
	}
	if _, err := ReadMachine(); err != nil {
		t.Fatal(err)
	}
}
