package mockprovider

import (
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// RequestLogOptions turns on the request log: one RequestRecord per model
// request with its arrival, service start and end times and chosen
// headers, for ground truth that needs more than counters (was a request
// sent to the provider after its caller had given up? how long did it wait
// for a slot?). It costs a lock and a few small allocations per request,
// so it is off by default and bounded.
type RequestLogOptions struct {
	// Max is how many records are kept; requests beyond it are counted in
	// Dropped but not recorded. 0 turns the log off.
	Max int
	// Headers are the request headers to keep (case-insensitive); empty
	// keeps none.
	Headers []string
}

// RequestRecord is one model request as the mock saw it. Times are the
// mock's clock (the same process's clock when it runs in process).
type RequestRecord struct {
	Seq   uint64 `json:"seq"`
	Path  string `json:"path"`
	Model string `json:"model"`
	// Arrived is when the mock had read the request.
	Arrived time.Time `json:"arrived"`
	// Started is when it began to be served (took a slot); zero if it never
	// was (rejected at the slots, or its client left while it queued).
	Started time.Time `json:"started,omitzero"`
	// Ended is when its outcome was decided; zero while it runs.
	Ended time.Time `json:"ended,omitzero"`
	// Outcome is "completed", "failed", "cancelled", or "" while it runs.
	Outcome string `json:"outcome,omitempty"`
	// Headers are the kept request headers, lower-case names.
	Headers map[string]string `json:"headers,omitempty"`
}

// RequestLog is the body of GET /_mock/requests.
type RequestLog struct {
	Records []RequestRecord `json:"records"`
	// Dropped counts requests not recorded because the log was full.
	Dropped int64 `json:"dropped"`
}

var outcomeNames = [...]string{outcomeCompleted: "completed", outcomeFailed: "failed", outcomeCancelled: "cancelled"}

type requestLog struct {
	max     int
	headers []string

	mu      sync.Mutex
	recs    []RequestRecord
	dropped int64
	// base is the ordinal of recs[0]: resets advance it, so a request that
	// straddles a reset cannot touch a newer request's record.
	base int
}

func (l *requestLog) init(o RequestLogOptions) {
	l.max = o.Max
	for _, h := range o.Headers {
		l.headers = append(l.headers, strings.ToLower(h))
	}
}

// arrive records a request and returns its ordinal (-1: not recorded).
func (l *requestLog) arrive(seq uint64, path []byte, model string, h *fasthttp.RequestHeader) int {
	if l.max <= 0 {
		return -1
	}
	rec := RequestRecord{Seq: seq, Path: string(path), Model: model, Arrived: time.Now()}
	for _, name := range l.headers {
		if v := h.Peek(name); len(v) > 0 {
			if rec.Headers == nil {
				rec.Headers = map[string]string{}
			}
			rec.Headers[name] = string(v)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.recs) >= l.max {
		l.dropped++
		return -1
	}
	l.recs = append(l.recs, rec)
	return l.base + len(l.recs) - 1
}

func (l *requestLog) started(i int) {
	if i < 0 {
		return
	}
	now := time.Now()
	l.mu.Lock()
	if i -= l.base; i >= 0 && i < len(l.recs) {
		l.recs[i].Started = now
	}
	l.mu.Unlock()
}

func (l *requestLog) ended(i int, o outcome) {
	if i < 0 {
		return
	}
	now := time.Now()
	l.mu.Lock()
	if i -= l.base; i >= 0 && i < len(l.recs) {
		l.recs[i].Ended, l.recs[i].Outcome = now, outcomeNames[o]
	}
	l.mu.Unlock()
}

func (l *requestLog) log() RequestLog {
	l.mu.Lock()
	defer l.mu.Unlock()
	return RequestLog{Records: append([]RequestRecord(nil), l.recs...), Dropped: l.dropped}
}

// reset drops the records.
func (l *requestLog) reset() {
	l.mu.Lock()
	l.base += len(l.recs)
	l.recs, l.dropped = nil, 0
	l.mu.Unlock()
}

// Requests returns the request log (GET /_mock/requests); empty unless
// Options.RequestLog.Max is set.
func (s *Server) Requests() RequestLog { return s.requests.log() }

// ModelCounters returns one model's counters without building the whole
// Stats (no body log), for callers that sample often; At is when they were
// read.
func (s *Server) ModelCounters(model string) (c Counters, at time.Time) {
	s.modelsMu.RLock()
	m := s.models[model]
	s.modelsMu.RUnlock()
	at = time.Now()
	if m != nil {
		c = m.c.snapshot()
	}
	return c, at
}

// Requests returns GET /_mock/requests.
func (c *Client) Requests() (RequestLog, error) {
	var l RequestLog
	err := c.do(http.MethodGet, "/_mock/requests", nil, &l)
	return l, err
}
