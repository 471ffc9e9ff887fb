package loadgen

import (
	"slices"
	"strconv"
)

// Outcome classifies what happened to one request.
type Outcome uint8

// Outcomes.
const (
	// OK is a 2xx answer; for a stream it also saw its terminal event.
	OK Outcome = iota
	// HTTPError is a non-2xx answer (its status and error code are kept).
	HTTPError
	// InBandError is a stream that carried an error event after its headers.
	InBandError
	// Truncated is a stream that ended without its terminal event.
	Truncated
	// Timeout is a request that hit the client timeout.
	Timeout
	// ConnError is a connection that failed (refused, reset, closed early).
	ConnError
	// NotSent is an arrival the generator could not send before the phase's
	// hard deadline (its backlog); it counts against the target, not as a
	// success.
	NotSent
)

var outcomeNames = [...]string{"ok", "http_error", "in_band_error", "truncated", "timeout", "conn_error", "not_sent"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Record is one request. Times are nanoseconds since the phase's epoch.
// Latency is End-Intended: in an open loop Intended is the scheduled send
// time, so time spent waiting in the generator is charged to the latency
// (no coordinated omission); in a closed loop Intended equals Start.
type Record struct {
	Intended int64
	Start    int64
	First    int64 // first content event of a stream (0: none)
	End      int64
	Code     string // error code from a non-2xx body or an in-band error
	Events   int32  // SSE data events received (a stream's [DONE] included)
	Status   int16
	Outcome  Outcome
	// RetryAfter is set when a 429 or 503 answer carried Retry-After or
	// retry-after-ms.
	RetryAfter bool
}

// Latency is the time from the scheduled send (or the actual send, if the
// generator happened to send early) to the last byte, in nanoseconds.
func (r *Record) Latency() int64 { return r.End - min(r.Intended, r.Start) }

// TTFT is the time from the scheduled send to the first content event.
func (r *Record) TTFT() int64 { return r.First - min(r.Intended, r.Start) }

// Answered reports whether the target sent an HTTP status.
func (r *Record) Answered() bool { return r.Status != 0 }

// Stats is an exact summary of a set of latencies, in milliseconds.
type Stats struct {
	N    int     `json:"n"`
	Min  float64 `json:"min_ms"`
	Mean float64 `json:"mean_ms"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p999_ms"`
	Max  float64 `json:"max_ms"`
}

// StatsOf sorts ns in place and summarises it (nearest-rank percentiles).
func StatsOf(ns []int64) Stats {
	if len(ns) == 0 {
		return Stats{}
	}
	slices.Sort(ns)
	var sum float64
	for _, v := range ns {
		sum += float64(v)
	}
	q := func(p float64) float64 {
		i := int(p*float64(len(ns))+0.999999) - 1
		i = min(max(i, 0), len(ns)-1)
		return ms(ns[i])
	}
	return Stats{
		N: len(ns), Min: ms(ns[0]), Mean: sum / float64(len(ns)) / 1e6,
		P50: q(0.50), P90: q(0.90), P99: q(0.99), P999: q(0.999), Max: ms(ns[len(ns)-1]),
	}
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }
