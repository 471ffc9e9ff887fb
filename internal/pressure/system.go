package pressure

import (
	"math"
	"os"
	"path"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
)

// System reads memory figures of the running process from the kernel's
// files under Root ("/" in production; a directory tree in tests) and from
// the Go runtime. It has no goroutines and keeps no state besides the
// cgroup directory it located once.
type System struct {
	// Root is prepended to every kernel path ("" means "/").
	Root string
	// PSI selects the pressure-stall source: PSIAuto (the cgroup's own
	// memory.pressure, else the host's /proc/pressure/memory), PSICgroup,
	// PSIHost or PSIOff.
	PSI PSISource

	cg       cgroupDir
	located  bool
	goSample []metrics.Sample
}

// PSISource names where memory pressure stall figures come from.
type PSISource string

// PSI sources.
const (
	PSIAuto   PSISource = "auto"
	PSICgroup PSISource = "cgroup"
	PSIHost   PSISource = "host"
	PSIOff    PSISource = "off"
)

// cgroupDir is the process's memory cgroup.
type cgroupDir struct {
	dir   string // absolute path (under Root) of the cgroup's directory
	mount string // the mount point; limits are looked up to here
	v1    bool
}

func (s *System) path(p string) string {
	if s.Root == "" || s.Root == "/" {
		return p
	}
	return filepath.Join(s.Root, p)
}

func (s *System) read(p string) ([]byte, bool) {
	b, err := os.ReadFile(p)
	if err != nil || len(b) > 1<<20 {
		return nil, false
	}
	return b, true
}

// locate finds the memory cgroup of the process: the v2 unified
// hierarchy when mounted, else the v1 memory controller.
func (s *System) locate() cgroupDir {
	if s.located {
		return s.cg
	}
	s.located = true
	cgb, ok1 := s.read(s.path("/proc/self/cgroup"))
	mib, ok2 := s.read(s.path("/proc/self/mountinfo"))
	if ok1 && ok2 {
		// In the hybrid layout a v2 hierarchy is mounted without the memory
		// controller; take the first candidate that has memory files.
		for _, d := range ResolveCgroups(ParseProcCgroup(cgb), ParseMountinfo(mib)) {
			probe := "memory.current"
			if d.v1 {
				probe = "memory.usage_in_bytes"
			}
			dir := s.path(d.dir)
			if _, ok := s.read(filepath.Join(dir, probe)); ok {
				s.cg = cgroupDir{dir: dir, mount: s.path(d.mount), v1: d.v1}
				return s.cg
			}
		}
	}
	// Fallbacks for unusual /proc layouts: the conventional mount points.
	if _, ok := s.read(s.path("/sys/fs/cgroup/memory.max")); ok {
		s.cg = cgroupDir{dir: s.path("/sys/fs/cgroup"), mount: s.path("/sys/fs/cgroup")}
	} else if _, ok := s.read(s.path("/sys/fs/cgroup/memory/memory.limit_in_bytes")); ok {
		s.cg = cgroupDir{dir: s.path("/sys/fs/cgroup/memory"), mount: s.path("/sys/fs/cgroup/memory"), v1: true}
	}
	return s.cg
}

// ResolvedCgroup is a candidate memory cgroup (paths as the process sees
// them, without System.Root).
type ResolvedCgroup struct {
	dir, mount string
	v1         bool
}

// Dir is the cgroup's directory.
func (r ResolvedCgroup) Dir() string { return r.dir }

// ResolveCgroups maps the process's cgroup entries onto the mounts: the v2
// unified hierarchy first, then the v1 memory controller. A cgroup path
// outside the mount's root (a cgroup namespace the mount table does not
// reflect) resolves to the mount point itself.
func ResolveCgroups(entries []CgroupEntry, mounts []Mount) []ResolvedCgroup {
	join := func(m Mount, p string) ResolvedCgroup {
		rel := p
		if m.Root != "/" && m.Root != "" {
			if r, ok := strings.CutPrefix(p, m.Root); ok && (r == "" || r[0] == '/') {
				rel = r
			} else {
				rel = "/"
			}
		}
		rel = path.Clean("/" + rel)
		mp := path.Clean(m.MountPoint)
		return ResolvedCgroup{dir: path.Join(mp, rel), mount: mp}
	}
	var out []ResolvedCgroup
	for _, e := range entries {
		if len(e.Controllers) != 0 {
			continue
		}
		for _, m := range mounts {
			if m.FSType == "cgroup2" {
				out = append(out, join(m, e.Path))
				break
			}
		}
	}
	for _, e := range entries {
		if !slices.Contains(e.Controllers, "memory") {
			continue
		}
		for _, m := range mounts {
			if m.FSType == "cgroup" && slices.Contains(m.Options, "memory") {
				r := join(m, e.Path)
				r.v1 = true
				out = append(out, r)
				break
			}
		}
	}
	return out
}

// v1Unlimited: cgroup v1 reports "no limit" as a page-rounded
// math.MaxInt64; anything this large is no limit.
const v1Unlimited = int64(1) << 62

// CgroupLimit returns the tightest memory limit of the process's cgroup
// and its ancestors up to the mount point (a parent's limit binds its
// children too), or -1 when there is none.
func (s *System) CgroupLimit() int64 {
	cg := s.locate()
	if cg.dir == "" {
		return -1
	}
	file := "memory.max"
	if cg.v1 {
		file = "memory.limit_in_bytes"
	}
	limit := int64(-1)
	dir := cg.dir
	for i := 0; i < 64; i++ {
		if b, ok := s.read(filepath.Join(dir, file)); ok {
			if v := ParseBytesValue(b); v > 0 && v < v1Unlimited && (limit < 0 || v < limit) {
				limit = v
			}
		}
		if dir == cg.mount || len(dir) <= len(cg.mount) {
			break
		}
		dir = filepath.Dir(dir)
	}
	return limit
}

// PhysicalMemory returns MemTotal, or -1.
func (s *System) PhysicalMemory() int64 {
	b, ok := s.read(s.path("/proc/meminfo"))
	if !ok {
		return -1
	}
	return ParseMeminfoTotal(b)
}

// GoMemoryLimit returns the Go runtime's soft memory limit (GOMEMLIMIT or
// debug.SetMemoryLimit), or -1 when none is set.
func GoMemoryLimit() int64 {
	l := debug.SetMemoryLimit(-1)
	if l <= 0 || l == math.MaxInt64 {
		return -1
	}
	return l
}

// Go runtime metrics read each sample: memory the runtime has mapped and
// not returned to the OS is what the memory limit counts.
const (
	metricTotal    = "/memory/classes/total:bytes"
	metricReleased = "/memory/classes/heap/released:bytes"
)

// Sample reads one observation. Every figure it cannot read is -1.
func (s *System) Sample() Sample {
	out := Sample{GoUsed: -1, GoLimit: GoMemoryLimit(), CgroupCurrent: -1, CgroupFile: -1, CgroupMax: -1, CgroupHigh: -1,
		OOM: -1, OOMKill: -1, PSISome: -1, PSIFull: -1, CPUBusy: -1, CPUTotal: -1, CgroupCPUUsage: -1, CgroupThrottled: -1}
	if b, ok := s.read(s.path("/proc/stat")); ok {
		out.CPUBusy, out.CPUTotal = ParseCPUStat(b)
	}
	if s.goSample == nil {
		s.goSample = []metrics.Sample{{Name: metricTotal}, {Name: metricReleased}}
	}
	metrics.Read(s.goSample)
	if s.goSample[0].Value.Kind() == metrics.KindUint64 && s.goSample[1].Value.Kind() == metrics.KindUint64 {
		out.GoUsed = int64(s.goSample[0].Value.Uint64() - s.goSample[1].Value.Uint64())
	}
	cg := s.locate()
	if cg.dir != "" {
		s.sampleCgroup(cg, &out)
	}
	if s.PSI != PSIOff {
		var b []byte
		ok := false
		if cg.dir != "" && !cg.v1 && s.PSI != PSIHost {
			if b, ok = s.read(filepath.Join(cg.dir, "memory.pressure")); ok {
				out.PSIFrom = "cgroup"
			}
		}
		if !ok && s.PSI != PSICgroup {
			if b, ok = s.read(s.path("/proc/pressure/memory")); ok {
				out.PSIFrom = "host"
			}
		}
		if ok {
			some, full := ParsePSI(b)
			if some.OK {
				out.PSISome = some.Avg10
			}
			if full.OK {
				out.PSIFull = full.Avg10
			}
		}
	}
	return out
}

func (s *System) sampleCgroup(cg cgroupDir, out *Sample) {
	get := func(name string) []byte {
		b, _ := s.read(filepath.Join(cg.dir, name))
		return b
	}
	if cg.v1 {
		out.CgroupCurrent = ParseBytesValue(get("memory.usage_in_bytes"))
		stat := get("memory.stat")
		if out.CgroupFile = ParseKeyedValue(stat, "total_cache"); out.CgroupFile < 0 {
			out.CgroupFile = ParseKeyedValue(stat, "cache")
		}
		out.CgroupMax = s.CgroupLimit()
		out.OOMKill = ParseKeyedValue(get("memory.oom_control"), "oom_kill")
		return
	}
	out.CgroupCurrent = ParseBytesValue(get("memory.current"))
	out.CgroupFile = ParseKeyedValue(get("memory.stat"), "file")
	cpu := get("cpu.stat")
	out.CgroupCPUUsage = ParseKeyedValue(cpu, "usage_usec")
	out.CgroupThrottled = ParseKeyedValue(cpu, "throttled_usec")
	out.CgroupMax = s.CgroupLimit()
	out.CgroupHigh = ParseBytesValue(get("memory.high"))
	ev := get("memory.events")
	out.OOM = ParseKeyedValue(ev, "oom")
	out.OOMKill = ParseKeyedValue(ev, "oom_kill")
}
