package budget

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/omniroute/gateway/internal/pressure"
	"github.com/omniroute/gateway/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

const (
	KiB = int64(1) << 10
	MiB = int64(1) << 20
	GiB = int64(1) << 30
)

func TestDerive(t *testing.T) {
	cases := []struct {
		name    string
		in      Inputs
		bytes   int64
		ceiling int64
		src     Source
	}{
		{"512 MiB Go limit", Inputs{GoMemLimit: 512 * MiB}, 16 * MiB, 512 * MiB, SourceGoMemLimit},
		{"4 GiB cgroup", Inputs{CgroupLimit: 4 * GiB, Physical: 64 * GiB}, 128 * MiB, 4 * GiB, SourceCgroup},
		{"32 GiB physical", Inputs{Physical: 32 * GiB}, 1 * GiB, 32 * GiB, SourcePhysical},
		{"100 GiB physical hits the cap", Inputs{Physical: 100 * GiB}, 2 * GiB, 100 * GiB, SourcePhysical},
		{"64 MiB hits the floor", Inputs{GoMemLimit: 64 * MiB}, 8 * MiB, 64 * MiB, SourceGoMemLimit},
		{"override 1 KiB is clamped to the floor", Inputs{Override: 1 * KiB, GoMemLimit: 4 * GiB}, 8 * MiB, 8 * MiB, SourceOverride},
		{"override over the cap", Inputs{Override: 3 * GiB}, 2 * GiB, 2 * GiB, SourceOverride},
		{"override in range wins over limits", Inputs{Override: 16 * MiB, CgroupLimit: 100 * GiB}, 16 * MiB, 16 * MiB, SourceOverride},
		{"tighter Go limit wins over cgroup", Inputs{GoMemLimit: 512 * MiB, CgroupLimit: 4 * GiB}, 16 * MiB, 512 * MiB, SourceGoMemLimit},
		{"tighter cgroup wins over Go limit", Inputs{GoMemLimit: 8 * GiB, CgroupLimit: 4 * GiB}, 128 * MiB, 4 * GiB, SourceCgroup},
		{"tie names the cgroup", Inputs{GoMemLimit: 4 * GiB, CgroupLimit: 4 * GiB}, 128 * MiB, 4 * GiB, SourceCgroup},
		{"unset Go limit (MaxInt64) is ignored", Inputs{GoMemLimit: math.MaxInt64, Physical: 4 * GiB}, 128 * MiB, 4 * GiB, SourcePhysical},
		{"nothing known gives the floor", Inputs{}, 8 * MiB, 0, SourcePhysical},
		{"256 MiB is the floor crossover", Inputs{GoMemLimit: 256 * MiB}, 8 * MiB, 256 * MiB, SourceGoMemLimit},
		{"64 GiB is the cap crossover", Inputs{CgroupLimit: 64 * GiB}, 2 * GiB, 64 * GiB, SourceCgroup},
	}
	for _, c := range cases {
		got := Derive(c.in)
		if got.Bytes != c.bytes || got.CeilingBytes != c.ceiling || got.Source != c.src {
			t.Errorf("%s: got %+v, want bytes %d ceiling %d source %s", c.name, got, c.bytes, c.ceiling, c.src)
		}
	}
}

// TestLimitIsARealLimit: the memory limit the pressure sampler compares
// the Go heap with is GOMEMLIMIT or the cgroup's, whatever the override,
// and never the physical memory.
func TestLimitIsARealLimit(t *testing.T) {
	cases := []struct {
		name  string
		in    Inputs
		limit int64
	}{
		{"override without limits", Inputs{Override: 16 * MiB, Physical: 32 * GiB}, 0},
		{"override with GOMEMLIMIT", Inputs{Override: 16 * MiB, GoMemLimit: 1 * GiB}, 1 * GiB},
		{"override with a cgroup", Inputs{Override: 16 * MiB, CgroupLimit: 2 * GiB}, 2 * GiB},
		{"the tighter of both", Inputs{GoMemLimit: 3 * GiB, CgroupLimit: 2 * GiB}, 2 * GiB},
		{"physical only", Inputs{Physical: 8 * GiB}, 0},
		{"unset Go limit", Inputs{GoMemLimit: math.MaxInt64}, 0},
	}
	for _, c := range cases {
		if got := Derive(c.in).LimitBytes; got != c.limit {
			t.Errorf("%s: LimitBytes %d, want %d", c.name, got, c.limit)
		}
	}
}

func TestResolveReadsSystem(t *testing.T) {
	root := t.TempDir()
	write := func(p, s string) {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("proc/self/cgroup", "0::/\n")
	write("proc/self/mountinfo", "24 30 0:22 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")
	write("proc/meminfo", "MemTotal: 67108864 kB\n")
	write("sys/fs/cgroup/memory.max", "4294967296\n")
	write("sys/fs/cgroup/memory.current", "1\n")

	prev := debug.SetMemoryLimit(math.MaxInt64)
	defer debug.SetMemoryLimit(prev)
	if b := Resolve(0, &pressure.System{Root: root}); b.Source != SourceCgroup || b.Bytes != 128*MiB {
		t.Fatalf("cgroup: %+v", b)
	}
	debug.SetMemoryLimit(512 * MiB)
	if b := Resolve(0, &pressure.System{Root: root}); b.Source != SourceGoMemLimit || b.Bytes != 16*MiB {
		t.Fatalf("GOMEMLIMIT: %+v", b)
	}
	if b := Resolve(32*MiB, &pressure.System{Root: root}); b.Source != SourceOverride || b.Bytes != 32*MiB {
		t.Fatalf("override: %+v", b)
	}
	debug.SetMemoryLimit(math.MaxInt64)
	if b := Resolve(0, &pressure.System{Root: t.TempDir()}); b.Source != SourcePhysical || b.Bytes != Floor {
		t.Fatalf("nothing readable: %+v", b)
	}
}
