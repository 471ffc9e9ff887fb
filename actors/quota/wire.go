package quota

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/messages"
)

// The readings members share travel as JSON inside a protobuf BytesValue,
// as the cluster's cooldowns do (transport/cluster_cooldowns.go): the
// remote layer needs a protobuf message, a well-known type needs no code
// generation, and JSON keeps the format readable and tolerant of fields a
// newer member adds. A batch is small (a connection's latest observation
// per model, or one poll's values) and leaves at most a few times a
// second per connection. It carries values, never a credential: poll
// errors name the endpoint and the status only (Fetch).

// wireQuota is one message: a connection's poll reading or header batch.
type wireQuota struct {
	Conn    string    `json:"conn"`
	From    string    `json:"from"`
	Poll    *wirePoll `json:"poll,omitempty"`
	Headers []wireObs `json:"headers,omitempty"`
}

type wirePoll struct {
	At     int64       `json:"at"` // Unix ns, when the poll started
	Err    string      `json:"err,omitempty"`
	Values []wireValue `json:"values"`
}

type wireValue struct {
	Dim        uint8   `json:"d"`
	Model      string  `json:"m,omitempty"`
	Flags      uint8   `json:"f"`
	Limit      float64 `json:"l,omitempty"`
	Used       float64 `json:"u,omitempty"`
	Remaining  float64 `json:"r,omitempty"`
	ResetAt    int64   `json:"reset,omitempty"` // Unix ns, 0: unknown
	Unit       string  `json:"unit,omitempty"`
	Confidence uint8   `json:"c"`
	Expires    int64   `json:"exp,omitempty"` // Unix ns, 0: never
}

type wireObs struct {
	Model    string        `json:"m"`
	At       int64         `json:"at"` // Unix ns, when the response was received
	Readings []wireReading `json:"r"`
}

type wireReading struct {
	Dim       uint8   `json:"d"`
	Flags     uint8   `json:"f"`
	Limit     float64 `json:"l,omitempty"`
	Remaining float64 `json:"r,omitempty"`
	ResetAt   int64   `json:"reset,omitempty"`
	Window    int64   `json:"w,omitempty"` // ns
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

func encodePoll(r quota.Reading, at time.Time) *wirePoll {
	p := &wirePoll{At: unixNano(at), Err: r.Err, Values: make([]wireValue, 0, len(r.Values))}
	for _, v := range r.Values {
		p.Values = append(p.Values, wireValue{Dim: uint8(v.Dimension), Model: v.Model, Flags: v.Flags, Limit: v.Limit, Used: v.Used,
			Remaining: v.Remaining, ResetAt: unixNano(v.ResetAt), Unit: v.Unit, Confidence: uint8(v.Confidence), Expires: unixNano(v.Expires)})
	}
	return p
}

// reading rebuilds the poll reading as the polling member's aggregator
// held it.
func (p *wirePoll) reading() (quota.Reading, time.Time) {
	r := quota.Reading{Source: quota.SourceProviderAPI, Supported: true, Err: p.Err, Values: make([]quota.Value, 0, len(p.Values))}
	for _, w := range p.Values {
		r.Values = append(r.Values, quota.Value{Dimension: messages.QuotaDimension(w.Dim), Model: w.Model, Flags: w.Flags, Limit: w.Limit, Used: w.Used,
			Remaining: w.Remaining, ResetAt: fromUnixNano(w.ResetAt), Unit: w.Unit, Source: quota.SourceProviderAPI,
			Confidence: quota.Confidence(w.Confidence), Expires: fromUnixNano(w.Expires)})
	}
	return r, fromUnixNano(p.At)
}

func encodeHeaders(obs []HeaderObserved) []wireObs {
	out := make([]wireObs, 0, len(obs))
	for _, o := range obs {
		w := wireObs{Model: o.Model, At: unixNano(o.Obs.At), Readings: make([]wireReading, 0, o.Obs.N)}
		for i := 0; i < o.Obs.N; i++ {
			r := &o.Obs.Readings[i]
			w.Readings = append(w.Readings, wireReading{Dim: uint8(r.Dimension), Flags: r.Flags, Limit: r.Limit, Remaining: r.Remaining,
				ResetAt: unixNano(r.ResetAt), Window: int64(r.Window)})
		}
		out = append(out, w)
	}
	return out
}

func decodeHeaders(ws []wireObs) []HeaderObserved {
	out := make([]HeaderObserved, 0, len(ws))
	for _, w := range ws {
		o := &messages.QuotaObservation{N: len(w.Readings), At: fromUnixNano(w.At)}
		for i, r := range w.Readings {
			o.Readings[i] = messages.QuotaReading{Dimension: messages.QuotaDimension(r.Dim), Flags: r.Flags, Limit: r.Limit, Remaining: r.Remaining,
				ResetAt: fromUnixNano(r.ResetAt), Window: time.Duration(r.Window)}
		}
		out = append(out, HeaderObserved{Model: w.Model, Obs: o})
	}
	return out
}

// maxPeerLead is how far ahead of this member's clock a peer's
// observation time may be before fromTheFuture corrects it: members'
// clocks agree to well within it when NTP runs.
const maxPeerLead = time.Second

// fromTheFuture moves the times of a peer's readings observed more than
// maxPeerLead after now (its clock runs ahead of this member's) back by
// that lead: the reading counts as observed now, and its reset and expiry
// keep their distance from the observation. Otherwise a peer whose clock is ahead would win
// every "freshest reading" comparison and keep its values alive past
// their time. A peer whose clock lags needs nothing: its readings look
// older than they are, lose to fresher ones and expire early (the safe
// direction).
func (w *wireQuota) fromTheFuture(now time.Time) {
	n := now.Add(maxPeerLead).UnixNano()
	back := func(t *int64, d int64) {
		if *t != 0 {
			*t -= d
		}
	}
	if p := w.Poll; p != nil && p.At > n {
		d := p.At - now.UnixNano()
		p.At = now.UnixNano()
		for i := range p.Values {
			back(&p.Values[i].ResetAt, d)
			back(&p.Values[i].Expires, d)
		}
	}
	for i := range w.Headers {
		o := &w.Headers[i]
		if o.At <= n {
			continue
		}
		d := o.At - now.UnixNano()
		o.At = now.UnixNano()
		for j := range o.Readings {
			back(&o.Readings[j].ResetAt, d)
		}
	}
}

var errWire = errors.New("quota: malformed peer message")

func encodeWire(w *wireQuota) ([]byte, error) { return json.Marshal(w) }

// decodeWire parses and checks a peer's message: a connection name, known
// dimensions, at most MaxQuotaReadings per observation, finite numbers.
func decodeWire(b []byte) (*wireQuota, error) {
	var w wireQuota
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("%w: %v", errWire, err)
	}
	if w.Conn == "" || w.From == "" {
		return nil, errWire
	}
	finite := func(fs ...float64) bool {
		for _, f := range fs {
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return false
			}
		}
		return true
	}
	if p := w.Poll; p != nil {
		for _, v := range p.Values {
			if v.Dim >= uint8(messages.NumQuotaDimensions) || !finite(v.Limit, v.Used, v.Remaining) {
				return nil, errWire
			}
		}
	}
	for _, o := range w.Headers {
		if len(o.Readings) > messages.MaxQuotaReadings || o.At == 0 {
			return nil, errWire
		}
		for _, r := range o.Readings {
			if r.Dim >= uint8(messages.NumQuotaDimensions) || !finite(r.Limit, r.Remaining) {
				return nil, errWire
			}
		}
	}
	return &w, nil
}
