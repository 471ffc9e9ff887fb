// Package budget derives the process-wide ingest byte budget: how many
// request-body bytes the gateway may hold at once.
//
// A body is copied several times while it is read, scanned and forwarded,
// and a heap needs headroom to collect, so the budget is a quarter of the
// memory the process may use, divided by an amplification factor of 8:
// budget = ceiling × 0.25 ÷ 8, clamped to [8 MiB, 2 GiB]. The ceiling is
// the tighter of the Go memory limit (GOMEMLIMIT or debug.SetMemoryLimit)
// and the cgroup memory limit; without either it is the machine's physical
// memory. OMNIROUTE_CHAT_MAX_INFLIGHT_BYTES overrides the result (clamped
// the same way). Derive is a pure function; Resolve reads the system once.
package budget

import (
	"math"

	"github.com/omniroute/gateway/internal/pressure"
)

// Bounds of the budget.
const (
	Floor int64 = 8 << 20
	Cap   int64 = 2 << 30
)

// The derivation's factors: a quarter of the ceiling, divided by the
// number of transient copies a body may have in memory.
const (
	heapFraction  = 0.25
	amplification = 8
)

// Source says where the ceiling came from.
type Source string

// Sources.
const (
	SourceGoMemLimit Source = "go_memlimit"
	SourceCgroup     Source = "cgroup"
	SourcePhysical   Source = "physical"
	SourceOverride   Source = "override"
)

// Inputs are the figures the budget is derived from; a value ≤ 0 (or
// math.MaxInt64 for the Go limit, its "unset") means unknown.
type Inputs struct {
	GoMemLimit  int64
	CgroupLimit int64
	Physical    int64
	Override    int64
}

// Budget is the derived budget.
type Budget struct {
	// Bytes is the number of body bytes that may be held at once.
	Bytes int64
	// CeilingBytes is the memory ceiling it was derived from (the clamped
	// value itself for an override; 0 when nothing was known).
	CeilingBytes int64
	Source       Source
	// LimitBytes is the real memory limit of the process, whatever the
	// budget: the tighter of the Go memory limit and the cgroup limit, 0
	// when neither is set. The Go memory ratio of the pressure sampler is
	// taken against it and nothing else: the budget override is a number
	// of body bytes, not a heap limit (taking it as one made a 16 MiB
	// override read as a heap 2.9 times over its limit), and the machine's
	// physical memory is not a limit the process is held to.
	LimitBytes int64
}

// Derive computes the budget. When both limits are known the tighter one
// is the ceiling; on a tie the cgroup is named, as the kernel enforces it.
func Derive(in Inputs) Budget {
	goLimit := in.GoMemLimit
	if goLimit == math.MaxInt64 {
		goLimit = 0
	}
	var limit int64
	switch {
	case goLimit > 0 && in.CgroupLimit > 0:
		limit = min(goLimit, in.CgroupLimit)
	case goLimit > 0:
		limit = goLimit
	case in.CgroupLimit > 0:
		limit = in.CgroupLimit
	}
	if in.Override > 0 {
		b := clamp(in.Override)
		return Budget{Bytes: b, CeilingBytes: b, Source: SourceOverride, LimitBytes: limit}
	}
	var ceiling int64
	var src Source
	switch {
	case goLimit > 0 && in.CgroupLimit > 0:
		ceiling, src = goLimit, SourceGoMemLimit
		if in.CgroupLimit <= goLimit {
			ceiling, src = in.CgroupLimit, SourceCgroup
		}
	case goLimit > 0:
		ceiling, src = goLimit, SourceGoMemLimit
	case in.CgroupLimit > 0:
		ceiling, src = in.CgroupLimit, SourceCgroup
	default:
		ceiling, src = max(in.Physical, 0), SourcePhysical
	}
	raw := int64(float64(ceiling) * heapFraction / amplification)
	return Budget{Bytes: clamp(raw), CeilingBytes: ceiling, Source: src, LimitBytes: limit}
}

func clamp(n int64) int64 { return min(max(n, Floor), Cap) }

// Resolve reads the Go memory limit, the cgroup limit (v2 memory.max, v1
// memory.limit_in_bytes, the tightest of the process's cgroup and its
// ancestors) and the physical memory, and derives the budget. override
// ≤ 0 means none. sys nil reads the real system.
func Resolve(override int64, sys *pressure.System) Budget {
	if sys == nil {
		sys = &pressure.System{}
	}
	return Derive(Inputs{
		GoMemLimit:  pressure.GoMemoryLimit(),
		CgroupLimit: sys.CgroupLimit(),
		Physical:    sys.PhysicalMemory(),
		Override:    override,
	})
}
