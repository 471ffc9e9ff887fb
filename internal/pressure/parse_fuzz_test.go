package pressure

import (
	"strings"
	"testing"
)

func FuzzParseBytesValue(f *testing.F) {
	for _, s := range []string{"max", "0", "123\n", "99999999999999999999", "-1", " 7 "} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v := ParseBytesValue(b)
		if v < -1 {
			t.Fatalf("ParseBytesValue(%q) = %d", b, v)
		}
	})
}

func FuzzParseKeyedValue(f *testing.F) {
	f.Add([]byte("anon 1\nfile 4096\n"), "file")
	f.Add([]byte("oom 1\noom_kill"), "oom_kill")
	f.Fuzz(func(t *testing.T, b []byte, key string) {
		if v := ParseKeyedValue(b, key); v < -1 {
			t.Fatalf("negative value %d", v)
		}
	})
}

func FuzzParsePSI(f *testing.F) {
	f.Add([]byte("some avg10=12.50 avg60=3.00 avg300=1.00 total=123\nfull avg10=0.75 avg60=0.10 avg300=0.00 total=9\n"))
	f.Add([]byte("some avg10=inf avg60=1 avg300=1 total=1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		some, full := ParsePSI(b)
		for _, p := range []PSI{some, full} {
			if p.OK && !(p.Avg10 >= 0 && p.Avg10 <= 100 && p.Avg60 >= 0 && p.Avg60 <= 100 && p.Avg300 >= 0 && p.Avg300 <= 100) {
				t.Fatalf("out of range PSI accepted: %+v from %q", p, b)
			}
		}
	})
}

func FuzzParseMeminfoTotal(f *testing.F) {
	f.Add([]byte("MemTotal:        8029180 kB\n"))
	f.Add([]byte("MemTotal: 99999999999999999 kB\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if v := ParseMeminfoTotal(b); v < -1 {
			t.Fatalf("negative %d", v)
		}
	})
}

func FuzzResolveCgroups(f *testing.F) {
	f.Add([]byte("0::/a/b\n5:memory:/docker/x\n"), []byte("24 30 0:22 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n40 24 0:35 /x /sys/fs/cgroup/mem\\040ory rw - cgroup cgroup rw,memory\n"))
	f.Fuzz(func(t *testing.T, cg, mi []byte) {
		mounts := ParseMountinfo(mi)
		for _, r := range ResolveCgroups(ParseProcCgroup(cg), mounts) {
			// A resolved directory never escapes its mount point.
			if r.dir != r.mount && !strings.HasPrefix(r.dir, strings.TrimSuffix(r.mount, "/")+"/") || strings.Contains(r.dir, "/../") {
				t.Fatalf("dir %q escapes mount %q", r.dir, r.mount)
			}
		}
	})
}

func FuzzParseCPUStat(f *testing.F) {
	f.Add([]byte("cpu  100 5 50 800 45 0 0 0 7 0\ncpu0 1 2 3 4 5\n"))
	f.Add([]byte("cpu 1 2"))
	f.Fuzz(func(t *testing.T, b []byte) {
		busy, total := ParseCPUStat(b)
		if (busy < 0) != (total < 0) || busy > total {
			t.Fatalf("ParseCPUStat(%q) = %d busy of %d", b, busy, total)
		}
	})
}
