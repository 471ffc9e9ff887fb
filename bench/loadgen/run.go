package loadgen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Load describes one phase of load against one target.
type Load struct {
	// Concurrency > 0 runs a closed loop: that many workers, each sending
	// its next request when the previous one finished.
	Concurrency int `json:"concurrency,omitempty"`
	// Rate > 0 runs an open loop: Poisson arrivals at Rate per second
	// (seeded), each sent by a free worker; latency counts from the
	// scheduled arrival, so a saturated target or generator shows up as
	// latency and backlog instead of as fewer requests (no coordinated
	// omission).
	Rate float64 `json:"rate,omitempty"`
	// Workers bounds the requests in flight in an open loop (default 4096).
	// Arrivals that find every worker busy wait in the generator's backlog;
	// their wait is part of their latency.
	Workers int `json:"workers,omitempty"`
	// Duration is the arrival window (open) or sending window (closed).
	Duration time.Duration `json:"duration_ns"`
	// MaxRequests bounds the arrivals or requests of the phase (default
	// 5,000,000).
	MaxRequests int `json:"max_requests,omitempty"`
	// PauseAfterRejection makes a closed-loop worker wait this long after a
	// 429 or 503 before its next request, as an SDK backs off before a
	// retry; without it a refused worker resends at once and the phase
	// measures how fast the target refuses.
	PauseAfterRejection time.Duration `json:"pause_after_rejection_ns,omitempty"`
	// Seed makes the arrival times reproducible.
	Seed uint64 `json:"seed,omitempty"`
}

// Result is one phase's raw outcome.
type Result struct {
	Load Load
	// Elapsed is the time until the last request finished (≥ Duration;
	// read once every worker returned: a composite literal that called
	// wait() after taking it measured only the start-up, and the figures
	// divided by it, the cores a process used, were thousands).
	Elapsed time.Duration
	// Records holds every arrival, in no particular order.
	Records []Record
	// MaxBacklog is the largest number of arrivals that were due but not
	// yet picked up by a worker (open loop).
	MaxBacklog int
}

const (
	defaultWorkers     = 4096
	defaultMaxRequests = 5_000_000
)

// Run drives one phase against c and returns when every request it started
// has finished. The phase is bounded: no arrival is scheduled after
// Duration, no request starts after Duration+s.Timeout (later arrivals are
// recorded as NotSent), and each request ends by its own timeout. ctx
// cancels the phase early.
func Run(ctx context.Context, c *Client, s *Spec, l Load) (*Result, error) {
	switch {
	case l.Duration <= 0:
		return nil, fmt.Errorf("load: duration %v must be positive", l.Duration)
	case s.Timeout <= 0:
		return nil, fmt.Errorf("load: request timeout %v must be positive", s.Timeout)
	case (l.Concurrency > 0) == (l.Rate > 0):
		return nil, fmt.Errorf("load: set exactly one of concurrency (closed loop) and rate (open loop); got %d and %g", l.Concurrency, l.Rate)
	}
	if l.MaxRequests <= 0 {
		l.MaxRequests = defaultMaxRequests
	}
	if l.Rate > 0 && l.Workers <= 0 {
		l.Workers = defaultWorkers
	}
	if l.Concurrency > 0 {
		return runClosed(ctx, c, s, l), nil
	}
	return runOpen(ctx, c, s, l), nil
}

func sinceFunc(epoch time.Time) func() int64 {
	return func() int64 { return int64(time.Since(epoch)) }
}

func runClosed(ctx context.Context, c *Client, s *Spec, l Load) *Result {
	epoch := time.Now()
	since := sinceFunc(epoch)
	stopAt := int64(l.Duration)
	var issued atomic.Int64
	wait := startWorkers(l.Concurrency, since, func(w *worker) []Record {
		recs := make([]Record, 0, 1024)
		for ctx.Err() == nil && since() < stopAt && issued.Add(1) <= int64(l.MaxRequests) {
			recs = append(recs, Record{})
			r := &recs[len(recs)-1]
			r.Intended = since()
			c.do(w, s, r)
			if p := l.PauseAfterRejection; p > 0 && (r.Status == 429 || r.Status == 503) {
				pause(ctx, min(p, time.Duration(stopAt-since())))
			}
		}
		return recs
	})
	recs := wait() // Elapsed is read after the workers finish, not before
	return &Result{Load: l, Elapsed: time.Since(epoch), Records: recs}
}

func runOpen(ctx context.Context, c *Client, s *Spec, l Load) *Result {
	expected := int(l.Rate*l.Duration.Seconds()*1.2) + 1024
	jobs := make(chan int64, min(expected, l.MaxRequests))
	epoch := time.Now()
	since := sinceFunc(epoch)
	hardStop := int64(l.Duration + s.Timeout)
	wait := startWorkers(l.Workers, since, func(w *worker) []Record {
		var recs []Record
		for at := range jobs {
			recs = append(recs, Record{Intended: at})
			r := &recs[len(recs)-1]
			if ctx.Err() != nil || since() > hardStop {
				r.Outcome = NotSent
				continue
			}
			c.do(w, s, r)
		}
		return recs
	})
	maxBacklog := schedule(ctx, l, jobs, since)
	close(jobs)
	recs := wait()
	return &Result{Load: l, Elapsed: time.Since(epoch), Records: recs, MaxBacklog: maxBacklog}
}

// startWorkers starts n workers, each on a goroutine with a worker (its
// connection and buffers) of its own, and returns a function that waits
// for them all and hands back their records in one slice. The closed and
// the open loop differ only in what a worker does: work.
func startWorkers(n int, since func() int64, work func(w *worker) []Record) (wait func() []Record) {
	per := make([][]Record, n)
	var wg sync.WaitGroup
	for i := range per {
		wg.Add(1)
		go func() {
			defer wg.Done()
			per[i] = work(newWorker(since))
		}()
	}
	return func() []Record {
		wg.Wait()
		return flatten(per)
	}
}

// schedule emits Poisson arrival times (ns since epoch) into jobs, sleeping
// until each is due. It runs on a locked OS thread with a 1 ns timer slack
// and sleeps with nanosleep: the Go runtime's timers wake about 1 ms late
// when the process is otherwise idle, which would add a millisecond of
// fake latency to every open-loop request at low rates; nanosleep wakes
// within tens of microseconds. Arrivals that are already due are released
// at once, so a late wake-up shows as a burst whose wait is charged to
// latency, never as fewer arrivals.
func schedule(ctx context.Context, l Load, jobs chan<- int64, since func() int64) int {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	setTimerSlack(1)
	defer setTimerSlack(defaultTimerSlackNS)

	rng := rand.New(rand.NewPCG(l.Seed, 0x9e3779b97f4a7c15))
	meanGap := 1e9 / l.Rate
	window := float64(l.Duration)
	maxBacklog := 0
	t := 0.0
	for n := 0; n < l.MaxRequests && ctx.Err() == nil; n++ {
		t += rng.ExpFloat64() * meanGap
		if t >= window {
			break
		}
		if wait := int64(t) - since(); wait > 20_000 {
			ts := syscall.NsecToTimespec(wait)
			_ = syscall.Nanosleep(&ts, nil)
		}
		jobs <- int64(t)
		maxBacklog = max(maxBacklog, len(jobs))
	}
	return maxBacklog
}

// pause sleeps for d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func flatten(per [][]Record) []Record {
	n := 0
	for _, p := range per {
		n += len(p)
	}
	out := make([]Record, 0, n)
	for _, p := range per {
		out = append(out, p...)
	}
	return out
}
