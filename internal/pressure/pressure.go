// Package pressure turns memory figures of the process into a severity
// (normal, high, critical) the admission stages act on.
//
// Inputs, read once a second by the resource-pressure actor through
// System.Sample: the Go runtime's mapped memory against its memory limit,
// the cgroup's working set (memory.current minus file cache) against
// memory.max, its raw usage against memory.high, its OOM counters
// (memory.events), and memory pressure stall figures (the cgroup's own
// memory.pressure where present, else the host's /proc/pressure/memory).
//
// Tracker is the state machine: a level must be seen in consecutive
// samples before it is entered (so one spike is not an outage), an OOM
// kill counts at once, and leaving an elevated level needs every signal
// below the recovery thresholds (hysteresis: a figure hovering at the high
// threshold does not flap). Critical steps down only to normal, never to
// high, so a recovering process is trusted only once it is clearly fine.
//
// Thresholds follow OmniRoute's newest defaults: ratios 0.85 high, 0.92
// critical, 0.75 recovery; PSI avg10 30 / 60 / 15 (host-wide PSI is noisy
// on shared machines, which caused OmniRoute's 503 storms, so the PSI
// source can be narrowed to the cgroup or turned off).
package pressure

import (
	"errors"
	"fmt"
	"time"

	"github.com/omniroute/gateway/internal/enum"
)

// Severity is the pressure level.
type Severity uint8

// Severities, in increasing order.
const (
	Normal Severity = iota
	High
	Critical
)

var severityNames = [...]string{"normal", "high", "critical"}

// String returns normal, high or critical.
func (s Severity) String() string { return enum.Name(severityNames[:], s, "unknown") }

// Reasons name the signal that set the severity.
const (
	ReasonNone        = "none"
	ReasonGoHeap      = "go_heap_ratio"
	ReasonCgroup      = "cgroup_ratio"
	ReasonCgroupHigh  = "cgroup_high"
	ReasonPSISome     = "psi_some"
	ReasonPSIFull     = "psi_full"
	ReasonOOM         = "oom_event"
	ReasonInjected    = "injected"
	ReasonUnavailable = "unavailable"
)

// Sample is one observation. Figures that could not be read are -1.
type Sample struct {
	// GoUsed is the memory the Go runtime holds from the OS; GoLimit its
	// memory limit (-1 when GOMEMLIMIT is unset).
	GoUsed, GoLimit int64
	// Cgroup figures in bytes: memory.current, the file cache part of it
	// (memory.stat "file"), the tightest memory.max, memory.high.
	CgroupCurrent, CgroupFile, CgroupMax, CgroupHigh int64
	// OOM and OOMKill are the cumulative memory.events counters.
	OOM, OOMKill int64
	// PSISome and PSIFull are the avg10 percentages; PSIFrom says whether
	// they came from the cgroup or the host.
	PSISome, PSIFull float64
	PSIFrom          string
	// CPUBusy and CPUTotal are the machine's cumulative CPU time (every
	// CPU, /proc/stat's first line, in clock ticks): busy is every state
	// but idle and iowait; -1 when unknown. CgroupCPUUsage and
	// CgroupThrottled are the cgroup's cpu.stat usage_usec and
	// throttled_usec (-1 when unknown, or without a v2 cgroup).
	CPUBusy, CPUTotal               int64
	CgroupCPUUsage, CgroupThrottled int64
}

// GoRatio is GoUsed/GoLimit, or -1.
func (s *Sample) GoRatio() float64 { return ratio(s.GoUsed, s.GoLimit) }

// WorkingSet is memory.current minus the file cache, falling back to the
// raw figure when the cache is unknown or implausible.
func (s *Sample) WorkingSet() int64 {
	if s.CgroupCurrent < 0 {
		return -1
	}
	if s.CgroupFile > 0 && s.CgroupFile <= s.CgroupCurrent {
		return s.CgroupCurrent - s.CgroupFile
	}
	return s.CgroupCurrent
}

// CgroupRatio is the working set over memory.max, or -1.
func (s *Sample) CgroupRatio() float64 { return ratio(s.WorkingSet(), s.CgroupMax) }

// CgroupHighRatio is memory.current over memory.high, or -1.
func (s *Sample) CgroupHighRatio() float64 { return ratio(s.CgroupCurrent, s.CgroupHigh) }

func ratio(used, limit int64) float64 {
	if used < 0 || limit <= 0 {
		return -1
	}
	return float64(used) / float64(limit)
}

// Config holds the thresholds.
type Config struct {
	// Ratios in [0, 1]: Recovery < High < Critical.
	HighRatio, CriticalRatio, RecoveryRatio float64
	// PSI avg10 percentages in [0, 100]: Recovery < High < Critical.
	PSIHigh, PSICritical, PSIRecovery float64
	// Consecutive samples needed to enter high, critical, and to recover;
	// each in [1, 10000].
	SustainHigh, SustainCritical, SustainRecovery int
}

// DefaultConfig returns OmniRoute's newest thresholds.
func DefaultConfig() Config {
	return Config{HighRatio: 0.85, CriticalRatio: 0.92, RecoveryRatio: 0.75,
		PSIHigh: 30, PSICritical: 60, PSIRecovery: 15,
		SustainHigh: 2, SustainCritical: 2, SustainRecovery: 1}
}

// Validate reports every inconsistent threshold.
func (c Config) Validate() error {
	var errs []error
	in := func(name string, v, lo, hi float64) {
		if !(v >= lo && v <= hi) {
			errs = append(errs, fmt.Errorf("%s=%v must lie in [%v, %v]", name, v, lo, hi))
		}
	}
	in("recovery ratio", c.RecoveryRatio, 0, 1)
	in("high ratio", c.HighRatio, 0, 1)
	in("critical ratio", c.CriticalRatio, 0, 1)
	in("recovery PSI", c.PSIRecovery, 0, 100)
	in("high PSI", c.PSIHigh, 0, 100)
	in("critical PSI", c.PSICritical, 0, 100)
	if !(c.RecoveryRatio < c.HighRatio && c.HighRatio < c.CriticalRatio) {
		errs = append(errs, fmt.Errorf("ratios must satisfy recovery (%v) < high (%v) < critical (%v)", c.RecoveryRatio, c.HighRatio, c.CriticalRatio))
	}
	if !(c.PSIRecovery < c.PSIHigh && c.PSIHigh < c.PSICritical) {
		errs = append(errs, fmt.Errorf("PSI thresholds must satisfy recovery (%v) < high (%v) < critical (%v)", c.PSIRecovery, c.PSIHigh, c.PSICritical))
	}
	for _, s := range []struct {
		name string
		v    int
	}{{"high sustain", c.SustainHigh}, {"critical sustain", c.SustainCritical}, {"recovery sustain", c.SustainRecovery}} {
		if s.v < 1 || s.v > 10000 {
			errs = append(errs, fmt.Errorf("%s=%d must lie in [1, 10000] samples", s.name, s.v))
		}
	}
	return errors.Join(errs...)
}

// State is the tracker's published view.
type State struct {
	Severity         Severity
	Reason           string
	ObservedAt       time.Time
	LastTransitionAt time.Time
	// Sample is the observation that produced this state.
	Sample Sample
	// CPUBusy is the share of the machine's CPUs that was busy since the
	// sample before (0..1; -1 unknown), and CPUThrottled the share of the
	// time the process's cgroup was throttled by its CPU quota (0..1; -1
	// unknown). Whose work used the CPUs does not matter (CPUSaturated).
	CPUBusy, CPUThrottled float64
}

// CPUSaturated reports whether the CPU the gateway runs on was used up
// over the last interval: its cgroup throttled by its quota for at least
// cpuThrottledShare of the time, or the machine's CPUs at least
// cpuBusyShare busy, whoever used them. Then every answer waits for a CPU,
// on the gateway's side and on any provider beside it (a mock, a local
// model server), and a load generator or a client on the same machine
// slows with the answers: latency that rises with the load says nothing
// about the provider's queue. This used to need the gateway's own process
// to use a quarter of the CPUs; with other processes taking most of them
// (the same load plus three busy loops, or builds beside it) the gateway's
// share fell below that, the controller cut the limit of a provider with
// no concurrency cap to 15-70 on CPU-inflated latency, and a tenant's
// closed loop was refused while admission off served it. A provider's own
// signals (refusals, timeouts) still cut.
func (s *State) CPUSaturated() bool {
	return s.CPUThrottled >= cpuThrottledShare || s.CPUBusy >= cpuBusyShare
}

// What a used-up CPU is: the machine's CPUs 90 % busy (a share of them
// stays idle only while nothing is runnable), or the process's cgroup
// throttled a tenth of the time.
const (
	cpuBusyShare      = 0.9
	cpuThrottledShare = 0.1
)

// Tracker is the severity state machine. It is not safe for concurrent
// use; the resource-pressure actor owns it.
type Tracker struct {
	cfg   Config
	state State

	pendSev  Severity
	pendWhy  string
	elevated int
	recovery int

	oomBase, killBase int64
	baselined         bool
}

// NewTracker starts at normal.
func NewTracker(cfg Config) *Tracker {
	return &Tracker{cfg: cfg, state: State{Severity: Normal, Reason: ReasonNone}}
}

// ResumeTracker starts at st, a state a previous tracker published (its
// streaks start over, and the next sample sets the OOM baseline): a
// restarted pressure actor keeps the severity it had.
func ResumeTracker(cfg Config, st State) *Tracker {
	return &Tracker{cfg: cfg, state: st}
}

// State returns the current state.
func (t *Tracker) State() State { return t.state }

// Observe feeds one sample taken at now and returns the new state.
func (t *Tracker) Observe(s Sample, now time.Time) State {
	t.state.CPUBusy, t.state.CPUThrottled = cpuShares(&t.state.Sample, &s, t.state.ObservedAt, now)
	t.state.ObservedAt = now
	t.state.Sample = s
	if t.oomEvent(&s) {
		t.set(Critical, ReasonOOM, now)
		return t.state
	}
	raw, why := t.level(&s)
	cur := t.state.Severity
	switch {
	case raw == cur:
		if raw == Normal {
			why = ReasonNone
		}
		t.set(cur, why, now)
	case raw > cur:
		t.recovery = 0
		if t.pendSev == raw && t.pendWhy == why {
			t.elevated++
		} else {
			t.pendSev, t.pendWhy, t.elevated = raw, why, 1
		}
		need := t.cfg.SustainHigh
		if raw == Critical {
			need = t.cfg.SustainCritical
		}
		if t.elevated >= need {
			t.set(raw, why, now)
		}
	default: // below the current level: recover only when clearly fine
		t.pendSev, t.pendWhy, t.elevated = Normal, "", 0
		if t.recovered(&s) {
			t.recovery++
			if t.recovery >= t.cfg.SustainRecovery {
				t.set(Normal, ReasonNone, now)
			}
		} else {
			t.recovery = 0
		}
	}
	return t.state
}

// set enters a level and clears the streaks.
func (t *Tracker) set(sev Severity, why string, now time.Time) {
	if sev != t.state.Severity || why != t.state.Reason {
		t.state.LastTransitionAt = now
	}
	t.state.Severity, t.state.Reason = sev, why
	t.pendSev, t.pendWhy, t.elevated, t.recovery = Normal, "", 0, 0
}

// oomEvent reports an increase of either OOM counter since the baseline.
// The first sample only sets the baseline; a decrease (counter reset) or
// missing counters re-baseline.
func (t *Tracker) oomEvent(s *Sample) bool {
	if s.OOM < 0 && s.OOMKill < 0 {
		t.baselined = false
		return false
	}
	if !t.baselined {
		t.oomBase, t.killBase, t.baselined = s.OOM, s.OOMKill, true
		return false
	}
	up := s.OOM > t.oomBase || s.OOMKill > t.killBase
	if s.OOM < t.oomBase || s.OOMKill < t.killBase {
		up = false
	}
	t.oomBase, t.killBase = s.OOM, s.OOMKill
	return up
}

// level is the raw severity of one sample: the worst signal; on a tie the
// earlier signal in the order below names the reason.
func (t *Tracker) level(s *Sample) (Severity, string) {
	sev, why := Normal, ReasonNone
	consider := func(v, high, critical float64, reason string) {
		if v < 0 {
			return
		}
		l := Normal
		switch {
		case v >= critical:
			l = Critical
		case v >= high:
			l = High
		}
		if l > sev {
			sev, why = l, reason
		}
	}
	c := &t.cfg
	consider(s.GoRatio(), c.HighRatio, c.CriticalRatio, ReasonGoHeap)
	consider(s.CgroupRatio(), c.HighRatio, c.CriticalRatio, ReasonCgroup)
	consider(s.CgroupHighRatio(), c.HighRatio, c.CriticalRatio, ReasonCgroupHigh)
	consider(s.PSISome, c.PSIHigh, c.PSICritical, ReasonPSISome)
	consider(s.PSIFull, c.PSIHigh, c.PSICritical, ReasonPSIFull)
	return sev, why
}

// recovered reports whether every known signal is at or below its
// recovery threshold.
func (t *Tracker) recovered(s *Sample) bool {
	c := &t.cfg
	for _, r := range [...]float64{s.GoRatio(), s.CgroupRatio(), s.CgroupHighRatio()} {
		if r > c.RecoveryRatio {
			return false
		}
	}
	return s.PSISome <= c.PSIRecovery && s.PSIFull <= c.PSIRecovery
}

// cpuShares compares two samples' CPU counters: the machine's busy share
// and the cgroup's throttled share between them (-1 each when a counter is
// missing or went back).
func cpuShares(prev, cur *Sample, prevAt, now time.Time) (busy, throttled float64) {
	busy, throttled = -1, -1
	if prev.CPUTotal > 0 && cur.CPUTotal > prev.CPUTotal && cur.CPUBusy >= prev.CPUBusy && prev.CPUBusy >= 0 {
		busy = min(1, float64(cur.CPUBusy-prev.CPUBusy)/float64(cur.CPUTotal-prev.CPUTotal))
	}
	dt := now.Sub(prevAt)
	if prevAt.IsZero() || dt <= 0 {
		return busy, throttled
	}
	if prev.CgroupThrottled >= 0 && cur.CgroupThrottled >= prev.CgroupThrottled {
		throttled = min(1, float64(cur.CgroupThrottled-prev.CgroupThrottled)/float64(dt.Microseconds()))
	}
	return busy, throttled
}
