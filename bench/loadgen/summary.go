package loadgen

import (
	"strconv"
	"time"
)

// Summary is what a phase measured, ready for the report. Latencies are
// from the scheduled send (see Record.Latency).
type Summary struct {
	Mode        string  `json:"mode"` // "closed" or "open"
	Concurrency int     `json:"concurrency,omitempty"`
	Rate        float64 `json:"offered_rate,omitempty"`
	WindowS     float64 `json:"window_s"`
	ElapsedS    float64 `json:"elapsed_s"`

	Arrivals int `json:"arrivals"` // requests scheduled (open) or sent (closed)
	Answered int `json:"answered"` // got an HTTP status
	OK       int `json:"ok"`
	// Throughput is OK answers completed inside the window per second
	// (goodput). Requests still in flight when the window ends are not
	// counted, and a closed loop starts with nothing completed, so for
	// long requests (streams) it is a slight underestimate, the same for
	// every target.
	Throughput float64 `json:"throughput_rps"`
	// AnsweredRate is answers of any status per second over the whole
	// phase (window + drain).
	AnsweredRate float64 `json:"answered_rps"`

	Statuses     map[string]int `json:"statuses,omitempty"`
	Codes        map[string]int `json:"error_codes,omitempty"` // from error bodies and in-band errors
	Timeouts     int            `json:"timeouts"`
	ConnErrors   int            `json:"conn_errors"`
	InBandErrors int            `json:"in_band_errors"`
	Truncated    int            `json:"truncated"`
	NotSent      int            `json:"not_sent"`

	// Latency of successful requests (a stream: to its last byte).
	Latency Stats     `json:"latency"`
	Hist    Histogram `json:"latency_hist"`

	// Rejections are 429 and 503 answers: how many, how many carried
	// Retry-After, and how fast they came back.
	Rejections           int   `json:"rejections"`
	RejectionsRetryAfter int   `json:"rejections_with_retry_after"`
	RejectionLatency     Stats `json:"rejection_latency"`
	// RejectionService is the same from the actual send (End-Start): the
	// target's part of it, without the generator's lag behind schedule.
	RejectionService Stats `json:"rejection_service"`

	// Streams: time to the first content event of successful streams, and
	// SSE data events received in total ([DONE] included).
	TTFT     *Stats     `json:"ttft,omitempty"`
	TTFTHist *Histogram `json:"ttft_hist,omitempty"`
	Events   int64      `json:"events,omitempty"`

	// Open loop: how late the generator sent (start - scheduled), how many
	// requests went out more than 1 ms late, and the largest backlog of due
	// but unsent arrivals. Non-zero late sends mean the generator, not only
	// the target, was saturated; their wait is inside Latency.
	SendLag    *Stats `json:"send_lag,omitempty"`
	LateSends  int    `json:"late_sends,omitempty"`
	MaxBacklog int    `json:"max_backlog,omitempty"`
	// GeneratorSaturated is set when more than 5 % of the arrivals went
	// out over 1 ms late or any was never sent: the offered load was not
	// achieved on time, so the cell measures the generator as well as the
	// target (on a shared 2-core machine this happens far below what a
	// dedicated load machine could offer).
	GeneratorSaturated bool `json:"generator_saturated,omitempty"`
}

// Summarize computes the phase's figures; it reorders nothing in r but
// allocates latency slices.
func Summarize(r *Result, stream bool) Summary {
	s := Summary{
		WindowS:  r.Load.Duration.Seconds(),
		ElapsedS: r.Elapsed.Seconds(),
		Arrivals: len(r.Records),
		Statuses: map[string]int{},
		Codes:    map[string]int{},
		Hist:     NewHistogram(),
	}
	if r.Load.Concurrency > 0 {
		s.Mode, s.Concurrency = "closed", r.Load.Concurrency
	} else {
		s.Mode, s.Rate, s.MaxBacklog = "open", r.Load.Rate, r.MaxBacklog
	}
	window := int64(r.Load.Duration)
	var lat, rej, rejSvc, ttft, lag []int64
	var ttftHist Histogram
	if stream {
		ttftHist = NewHistogram()
	}
	okInWindow := 0
	for i := range r.Records {
		rec := &r.Records[i]
		if rec.Answered() {
			s.Answered++
			s.Statuses[strconv.Itoa(int(rec.Status))]++
		}
		if rec.Code != "" {
			s.Codes[rec.Code]++
		}
		s.Events += int64(rec.Events)
		if s.Mode == "open" && rec.Outcome != NotSent {
			d := rec.Start - rec.Intended
			lag = append(lag, max(d, 0))
			if d > int64(time.Millisecond) {
				s.LateSends++
			}
		}
		switch rec.Outcome {
		case OK:
			s.OK++
			l := rec.Latency()
			lat = append(lat, l)
			s.Hist.Add(l)
			if rec.End <= window {
				okInWindow++
			}
			if stream && rec.First > 0 {
				t := rec.TTFT()
				ttft = append(ttft, t)
				ttftHist.Add(t)
			}
		case InBandError:
			s.InBandErrors++
		case Truncated:
			s.Truncated++
		case Timeout:
			s.Timeouts++
		case ConnError:
			s.ConnErrors++
		case NotSent:
			s.NotSent++
		}
		if rec.Status == 429 || rec.Status == 503 {
			s.Rejections++
			if rec.RetryAfter {
				s.RejectionsRetryAfter++
			}
			rej = append(rej, rec.Latency())
			rejSvc = append(rejSvc, rec.End-rec.Start)
		}
	}
	if w := r.Load.Duration.Seconds(); w > 0 {
		s.Throughput = float64(okInWindow) / w
	}
	if e := r.Elapsed.Seconds(); e > 0 {
		s.AnsweredRate = float64(s.Answered) / e
	}
	s.Latency = StatsOf(lat)
	s.RejectionLatency = StatsOf(rej)
	s.RejectionService = StatsOf(rejSvc)
	if stream {
		st := StatsOf(ttft)
		s.TTFT, s.TTFTHist = &st, &ttftHist
	}
	if s.Mode == "open" {
		st := StatsOf(lag)
		s.SendLag = &st
		s.GeneratorSaturated = s.NotSent > 0 || s.LateSends*20 > s.Arrivals
	}
	return s
}
