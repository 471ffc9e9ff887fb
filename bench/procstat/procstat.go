// Package procstat reads a process's own CPU time and memory from Linux
// procfs, so the benchmark can charge every component (mock, proxy,
// gateway, load generator) for exactly the work it did.
package procstat

import (
	"bytes"
	"fmt"
	"github.com/omniroute/gateway/internal/pressure"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// ClockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
// It is 100 on every mainstream Linux architecture; Go cannot ask sysconf
// without cgo. The resolution of a CPU figure is therefore 10 ms per
// process per cell, which is why cells run for seconds.
const ClockTicks = 100

// CPU returns the user+system CPU time the process has used so far (all
// threads), from /proc/<pid>/stat.
func CPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("read cpu time of pid %d: %w", pid, err)
	}
	return parseStat(b)
}

// parseStat extracts utime+stime. The command name (field 2) may contain
// spaces and parentheses, so fields are counted after the last ')'.
func parseStat(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc stat: no ')' in %q", truncate(b))
	}
	fields := bytes.Fields(b[i+1:])
	// fields[0] is field 3 (state); utime is field 14, stime field 15.
	if len(fields) < 13 {
		return 0, fmt.Errorf("parse /proc stat: %d fields after the name, want at least 13", len(fields))
	}
	ut, err1 := strconv.ParseUint(string(fields[11]), 10, 64)
	st, err2 := strconv.ParseUint(string(fields[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc stat: utime %q stime %q are not integers", fields[11], fields[12])
	}
	return time.Duration(ut+st) * time.Second / ClockTicks, nil
}

// Machine is the whole machine's CPU time so far, from the first line of
// /proc/stat: Busy is every state but idle and iowait, Total all of them
// (both summed over the CPUs). Two readings give the share of the
// machine's CPUs that was busy between them: how the benchmark shows
// that a scenario saturated the machine.
type Machine struct {
	Busy, Total time.Duration
}

// ReadMachine reads /proc/stat.
func ReadMachine() (Machine, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return Machine{}, fmt.Errorf("read machine cpu: %w", err)
	}
	return parseMachine(b)
}

// BusyShare is the busy share of the machine's CPUs between since and m
// (0..1; 0 when no time passed).
func (m Machine) BusyShare(since Machine) float64 {
	t := m.Total - since.Total
	if t <= 0 {
		return 0
	}
	return float64(m.Busy-since.Busy) / float64(t)
}

func parseMachine(b []byte) (Machine, error) {
	busy, total := pressure.ParseCPUStat(b)
	if total < 0 {
		return Machine{}, fmt.Errorf("parse /proc/stat: no cpu total line in %q", truncate(b))
	}
	tick := func(v int64) time.Duration { return time.Duration(v) * time.Second / ClockTicks }
	return Machine{Busy: tick(busy), Total: tick(total)}, nil
}

// SelfCPU returns this process's user+system CPU time with microsecond
// resolution (getrusage), used for the load generator itself.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Memory is a process's resident set and its high-water mark, in bytes.
type Memory struct {
	RSS int64 // VmRSS now
	HWM int64 // VmHWM: peak resident set over the process's life
}

// ReadMemory reads VmRSS and VmHWM from /proc/<pid>/status.
func ReadMemory(pid int) (Memory, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return Memory{}, fmt.Errorf("read memory of pid %d: %w", pid, err)
	}
	return parseStatus(b)
}

func parseStatus(b []byte) (Memory, error) {
	var m Memory
	var seen int
	for line := range bytes.Lines(b) { // Fields drops the line's '\n'
		var dst *int64
		switch {
		case bytes.HasPrefix(line, []byte("VmRSS:")):
			dst = &m.RSS
		case bytes.HasPrefix(line, []byte("VmHWM:")):
			dst = &m.HWM
		default:
			continue
		}
		f := bytes.Fields(line)
		if len(f) != 3 || string(f[2]) != "kB" {
			return Memory{}, fmt.Errorf("parse /proc status: unexpected line %q", line)
		}
		kb, err := strconv.ParseInt(string(f[1]), 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("parse /proc status: %q: %w", line, err)
		}
		*dst = kb << 10
		seen++
	}
	if seen != 2 {
		return Memory{}, fmt.Errorf("parse /proc status: VmRSS or VmHWM missing")
	}
	return m, nil
}

func truncate(b []byte) []byte {
	if len(b) > 80 {
		return b[:80]
	}
	return b
}

// Sampler polls the resident set of a few processes at a fixed interval and
// keeps each one's maximum and mean, so a cell's peak is seen even when the
// process gives memory back before the cell ends.
type Sampler struct {
	pids     []int
	interval time.Duration
	stop     chan struct{}
	done     chan struct{}

	mu      sync.Mutex
	peak    []int64
	sum     []int64
	samples int
}

// StartSampler samples pids every interval until Stop.
func StartSampler(pids []int, interval time.Duration) *Sampler {
	s := &Sampler{
		pids: pids, interval: interval,
		stop: make(chan struct{}), done: make(chan struct{}),
		peak: make([]int64, len(pids)), sum: make([]int64, len(pids)),
	}
	s.sample()
	go s.loop()
	return s
}

func (s *Sampler) loop() {
	defer close(s.done)
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			s.sample()
			return
		case <-t.C:
			s.sample()
		}
	}
}

func (s *Sampler) sample() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, pid := range s.pids {
		m, err := ReadMemory(pid)
		if err != nil {
			continue
		}
		s.peak[i] = max(s.peak[i], m.RSS)
		s.sum[i] += m.RSS
	}
	s.samples++
}

// Stop ends sampling (taking one last sample) and returns, per pid in the
// order given, the peak and the mean resident set in bytes.
func (s *Sampler) Stop() (peak, mean []int64) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	mean = make([]int64, len(s.pids))
	for i := range s.pids {
		mean[i] = s.sum[i] / int64(max(1, s.samples))
	}
	return append([]int64(nil), s.peak...), mean
}
