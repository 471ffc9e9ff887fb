package pressure

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func TestParseBytesValue(t *testing.T) {
	cases := []struct {
		in   string
		want int64
	}{
		{"536870912\n", 536870912}, {"0", 0}, {"max\n", -1}, {"", -1}, {"-1", -1}, {"1e9", -1},
		{"9223372036854775807", 9223372036854775807}, {"9223372036854775808", -1}, {"12345678901234567890", -1}, {" 42 ", 42},
	}
	for _, c := range cases {
		if got := ParseBytesValue([]byte(c.in)); got != c.want {
			t.Errorf("ParseBytesValue(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestParseKeyedValue(t *testing.T) {
	stat := "anon 1000\nfile 4096\nkernel 12\nfile_mapped 7\n"
	if got := ParseKeyedValue([]byte(stat), "file"); got != 4096 {
		t.Fatalf("file = %d", got)
	}
	if got := ParseKeyedValue([]byte(stat), "shmem"); got != -1 {
		t.Fatalf("missing key = %d", got)
	}
	ev := "low 0\nhigh 3\nmax 9\noom 2\noom_kill 1\noom_group_kill 0"
	if ParseKeyedValue([]byte(ev), "oom") != 2 || ParseKeyedValue([]byte(ev), "oom_kill") != 1 || ParseKeyedValue([]byte(ev), "oom_group_kill") != 0 {
		t.Fatal("memory.events counters")
	}
}

func TestParsePSI(t *testing.T) {
	some, full := ParsePSI([]byte("some avg10=12.50 avg60=3.00 avg300=1.00 total=123\nfull avg10=0.75 avg60=0.10 avg300=0.00 total=9\n"))
	if !some.OK || some.Avg10 != 12.5 || some.Avg60 != 3 || !full.OK || full.Avg10 != 0.75 {
		t.Fatalf("some %+v full %+v", some, full)
	}
	// Older kernels have no "full" line; garbage never yields a value.
	some, full = ParsePSI([]byte("some avg10=1.00 avg60=2.00 avg300=3.00 total=4\n"))
	if !some.OK || full.OK {
		t.Fatalf("some only: %+v %+v", some, full)
	}
	for _, bad := range []string{"some avg10=abc avg60=1 avg300=1 total=1", "some avg10=101 avg60=1 avg300=1 total=1", "some avg10=-1 avg60=1 avg300=1 total=1", "some", "full avg10=NaN avg60=0 avg300=0 total=0"} {
		s, f := ParsePSI([]byte(bad))
		if s.OK || f.OK {
			t.Errorf("ParsePSI(%q) accepted: %+v %+v", bad, s, f)
		}
	}
}

func TestParseMeminfoTotal(t *testing.T) {
	if got := ParseMeminfoTotal([]byte("MemTotal:        8029180 kB\nMemFree:  1 kB\n")); got != 8029180*1024 {
		t.Fatalf("MemTotal = %d", got)
	}
	if got := ParseMeminfoTotal([]byte("MemFree: 1 kB\n")); got != -1 {
		t.Fatalf("missing = %d", got)
	}
}

func TestResolveCgroups(t *testing.T) {
	mountinfo := `24 30 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate
25 30 0:23 / /proc rw - proc proc rw
40 24 0:35 / /sys/fs/cgroup/mem\040ory rw - cgroup cgroup rw,memory
`
	mounts := ParseMountinfo([]byte(mountinfo))
	if len(mounts) != 2 || mounts[1].MountPoint != "/sys/fs/cgroup/mem ory" || mounts[1].Options[1] != "memory" {
		t.Fatalf("mounts %+v", mounts)
	}
	cases := []struct {
		name, cgroup, mountinfo string
		want                    []string
	}{
		{"v2 container", "0::/\n", mountinfo, []string{"/sys/fs/cgroup", "/sys/fs/cgroup/mem ory"}},
		{"v2 service", "0::/system.slice/omniroute.service\n", mountinfo, []string{"/sys/fs/cgroup/system.slice/omniroute.service"}},
		{"v1 only", "5:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n", mountinfo, []string{"/sys/fs/cgroup/mem ory/docker/abc"}},
		{"escape attempt", "0::/../../etc\n", mountinfo, []string{"/sys/fs/cgroup/etc"}},
		{"namespace root mismatch", "0::/other\n", "24 30 0:22 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", []string{"/sys/fs/cgroup"}},
		{"inside mount root", "0::/kubepods/pod1/c1\n", "24 30 0:22 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", []string{"/sys/fs/cgroup/c1"}},
		{"no mounts", "0::/\n", "25 30 0:23 / /proc rw - proc proc rw\n", nil},
	}
	for _, c := range cases {
		got := ResolveCgroups(ParseProcCgroup([]byte(c.cgroup)), ParseMountinfo([]byte(c.mountinfo)))
		var dirs []string
		for _, g := range got {
			dirs = append(dirs, g.Dir())
		}
		if c.name == "v2 container" {
			dirs = dirs[:1]
			c.want = c.want[:1]
		}
		if len(dirs) != len(c.want) {
			t.Fatalf("%s: dirs %q, want %q", c.name, dirs, c.want)
		}
		for i := range dirs {
			if dirs[i] != c.want[i] {
				t.Fatalf("%s: dirs %q, want %q", c.name, dirs, c.want)
			}
		}
	}
}

// fakeTree builds a /proc + /sys layout under a temp dir.
func fakeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestSystemV2(t *testing.T) {
	root := fakeTree(t, map[string]string{
		"proc/self/cgroup":                                   "0::/app.slice/gw.service\n",
		"proc/self/mountinfo":                                "24 30 0:22 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
		"proc/meminfo":                                       "MemTotal: 16384 kB\n",
		"proc/pressure/memory":                               "some avg10=50.00 avg60=0 avg300=0 total=1\nfull avg10=5.00 avg60=0 avg300=0 total=1\n",
		"sys/fs/cgroup/app.slice/memory.max":                 "1073741824\n",
		"sys/fs/cgroup/app.slice/gw.service/memory.max":      "max\n",
		"sys/fs/cgroup/app.slice/gw.service/memory.current":  "600000000\n",
		"sys/fs/cgroup/app.slice/gw.service/memory.stat":     "anon 1\nfile 100000000\n",
		"sys/fs/cgroup/app.slice/gw.service/memory.high":     "max\n",
		"sys/fs/cgroup/app.slice/gw.service/memory.events":   "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n",
		"sys/fs/cgroup/app.slice/gw.service/memory.pressure": "some avg10=1.50 avg60=0 avg300=0 total=1\nfull avg10=0.50 avg60=0 avg300=0 total=1\n",
	})
	s := &System{Root: root, PSI: PSIAuto}
	if got := s.CgroupLimit(); got != 1<<30 {
		t.Fatalf("CgroupLimit = %d; want the parent slice's 1 GiB", got)
	}
	if got := s.PhysicalMemory(); got != 16384*1024 {
		t.Fatalf("PhysicalMemory = %d", got)
	}
	smp := s.Sample()
	if smp.CgroupCurrent != 600000000 || smp.CgroupFile != 100000000 || smp.CgroupMax != 1<<30 || smp.CgroupHigh != -1 || smp.OOM != 0 || smp.OOMKill != 0 {
		t.Fatalf("sample %+v", smp)
	}
	if smp.PSIFrom != "cgroup" || smp.PSISome != 1.5 || smp.PSIFull != 0.5 {
		t.Fatalf("auto PSI must prefer the cgroup's own file: %+v", smp)
	}
	if smp.WorkingSet() != 500000000 || smp.GoUsed <= 0 {
		t.Fatalf("working set %d, go used %d", smp.WorkingSet(), smp.GoUsed)
	}
	host := &System{Root: root, PSI: PSIHost}
	if h := host.Sample(); h.PSIFrom != "host" || h.PSISome != 50 {
		t.Fatalf("host PSI %+v", h)
	}
	off := &System{Root: root, PSI: PSIOff}
	if o := off.Sample(); o.PSIFrom != "" || o.PSISome != -1 {
		t.Fatalf("PSI off %+v", o)
	}
}

func TestSystemV1AndMissing(t *testing.T) {
	root := fakeTree(t, map[string]string{
		"proc/self/cgroup":                           "4:memory:/\n0::/\n",
		"proc/self/mountinfo":                        "24 30 0:22 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n40 24 0:35 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
		"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
		"sys/fs/cgroup/memory/memory.usage_in_bytes": "1000\n",
		"sys/fs/cgroup/memory/memory.stat":           "cache 10\ntotal_cache 20\n",
		"sys/fs/cgroup/memory/memory.oom_control":    "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n",
	})
	s := &System{Root: root}
	if got := s.CgroupLimit(); got != -1 {
		t.Fatalf("v1 unlimited must read as no limit, got %d", got)
	}
	smp := s.Sample()
	if smp.CgroupCurrent != 1000 || smp.CgroupFile != 20 || smp.OOMKill != 3 || smp.OOM != -1 {
		t.Fatalf("v1 sample %+v", smp)
	}
	empty := &System{Root: t.TempDir()}
	if empty.CgroupLimit() != -1 || empty.PhysicalMemory() != -1 {
		t.Fatal("missing files must read as unknown")
	}
	if e := empty.Sample(); e.CgroupCurrent != -1 || e.PSISome != -1 {
		t.Fatalf("empty sample %+v", e)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := DefaultConfig()
	bad.HighRatio, bad.PSICritical, bad.SustainRecovery = 0.95, 10, 0
	err := bad.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []string{"recovery (0.75) < high (0.95) < critical (0.92)", "PSI thresholds", "recovery sustain=0"} {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q lacks %q", err, w)
		}
	}
}

// smp builds a sample from a Go ratio and PSI some avg10 (other signals
// unknown).
func smp(goRatio, psi float64) Sample {
	s := Sample{GoUsed: -1, GoLimit: -1, CgroupCurrent: -1, CgroupFile: -1, CgroupMax: -1, CgroupHigh: -1, OOM: -1, OOMKill: -1, PSISome: psi, PSIFull: -1}
	if goRatio >= 0 {
		s.GoUsed, s.GoLimit = int64(goRatio*1000), 1000
	}
	return s
}

func TestTrackerStateMachine(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type step struct {
		s      Sample
		sev    Severity
		reason string
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"one spike is not enough", []step{
			{smp(0.90, -1), Normal, ReasonNone},
			{smp(0.50, -1), Normal, ReasonNone},
			{smp(0.90, -1), Normal, ReasonNone},
			{smp(0.90, -1), High, ReasonGoHeap},
		}},
		{"high then critical restarts the count", []step{
			{smp(0.90, -1), Normal, ReasonNone},
			{smp(0.95, -1), Normal, ReasonNone},
			{smp(0.95, -1), Critical, ReasonGoHeap},
		}},
		{"high to critical needs sustained critical samples", []step{
			{smp(0.90, -1), Normal, ReasonNone},
			{smp(0.90, -1), High, ReasonGoHeap},
			{smp(0.95, -1), High, ReasonGoHeap},
			{smp(0.90, -1), High, ReasonGoHeap},
			{smp(0.95, -1), High, ReasonGoHeap},
			{smp(0.95, -1), Critical, ReasonGoHeap},
		}},
		{"hysteresis: no recovery above the recovery ratio, no critical to high step-down", []step{
			{smp(0.95, -1), Normal, ReasonNone},
			{smp(0.95, -1), Critical, ReasonGoHeap},
			{smp(0.88, -1), Critical, ReasonGoHeap},
			{smp(0.80, -1), Critical, ReasonGoHeap},
			{smp(0.75, -1), Normal, ReasonNone},
		}},
		{"same level adopts the new reason", []step{
			{smp(0.90, -1), Normal, ReasonNone},
			{smp(0.90, -1), High, ReasonGoHeap},
			{smp(0.10, 40), High, ReasonPSISome},
			{smp(0.10, 14), Normal, ReasonNone},
		}},
		{"worst signal wins; ties keep the earlier signal", []step{
			{smp(0.86, 70), Normal, ReasonNone},
			{smp(0.86, 70), Critical, ReasonPSISome},
		}},
	}
	for _, c := range cases {
		tr := NewTracker(DefaultConfig())
		for i, st := range c.steps {
			got := tr.Observe(st.s, t0.Add(time.Duration(i)*time.Second))
			if got.Severity != st.sev || got.Reason != st.reason {
				t.Fatalf("%s: step %d: got %s/%s, want %s/%s", c.name, i, got.Severity, got.Reason, st.sev, st.reason)
			}
		}
	}
}

func TestTrackerTies(t *testing.T) {
	tr := NewTracker(DefaultConfig())
	s := Sample{GoUsed: 90, GoLimit: 100, CgroupCurrent: 90, CgroupFile: 0, CgroupMax: 100, CgroupHigh: -1, OOM: -1, OOMKill: -1, PSISome: -1, PSIFull: -1}
	tr.Observe(s, time.Unix(1, 0))
	if st := tr.Observe(s, time.Unix(2, 0)); st.Severity != High || st.Reason != ReasonGoHeap {
		t.Fatalf("tie must keep the Go ratio as reason: %+v", st)
	}
}

func TestTrackerOOMEvents(t *testing.T) {
	tr := NewTracker(DefaultConfig())
	base := smp(0.1, -1)
	base.OOM, base.OOMKill = 5, 2
	at := time.Unix(100, 0)
	if st := tr.Observe(base, at); st.Severity != Normal {
		t.Fatalf("first sample only baselines: %+v", st)
	}
	kill := base
	kill.OOMKill = 3
	st := tr.Observe(kill, at.Add(time.Second))
	if st.Severity != Critical || st.Reason != ReasonOOM || !st.LastTransitionAt.Equal(at.Add(time.Second)) {
		t.Fatalf("an OOM kill is critical at once: %+v", st)
	}
	// Calm and unchanged counters: recovers after SustainRecovery (1) sample.
	if st := tr.Observe(kill, at.Add(2*time.Second)); st.Severity != Normal {
		t.Fatalf("recovery: %+v", st)
	}
	// A counter reset re-baselines instead of firing.
	reset := base
	reset.OOM, reset.OOMKill = 0, 0
	if st := tr.Observe(reset, at.Add(3*time.Second)); st.Severity != Normal {
		t.Fatalf("reset must not fire: %+v", st)
	}
	reset.OOM = 1
	if st := tr.Observe(reset, at.Add(4*time.Second)); st.Severity != Critical {
		t.Fatalf("increase after re-baseline: %+v", st)
	}
}

func TestTrackerSustainConfig(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SustainRecovery = 3
	cfg.SustainCritical = 1
	tr := NewTracker(cfg)
	if st := tr.Observe(smp(0.99, -1), time.Unix(1, 0)); st.Severity != Critical {
		t.Fatalf("sustain 1: %+v", st)
	}
	for i := 0; i < 2; i++ {
		if st := tr.Observe(smp(0.1, -1), time.Unix(int64(2+i), 0)); st.Severity != Critical {
			t.Fatalf("recovery sample %d too early: %+v", i, st)
		}
	}
	if st := tr.Observe(smp(0.1, -1), time.Unix(5, 0)); st.Severity != Normal {
		t.Fatalf("third calm sample recovers: %+v", st)
	}
}
