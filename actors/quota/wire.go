package quota

import (
	"strings"
	"time"

	"github.com/omniroute/gateway/internal/quota"
	"github.com/omniroute/gateway/messages"
)

// The readings members share travel as messages.SharedQuotaPoll and
// messages.SharedQuotaHeaders on the cluster's one wire
// (internal/clusterwire). A batch is small (a connection's latest
// observation per model, or one poll's values) and leaves at most a few
// times a second per connection. It carries values, never a credential:
// poll errors name the endpoint and the status only (Fetch).

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

// encodePoll is connection conn's poll reading for the peers.
func encodePoll(conn string, r quota.Reading, at time.Time) *messages.SharedQuotaPoll {
	err := r.Err
	if len(err) > messages.MaxClusterString { // an error never costs the peers the values
		err = strings.ToValidUTF8(err[:messages.MaxClusterString-3], "") + "..."
	}
	p := &messages.SharedQuotaPoll{Conn: conn, At: unixNano(at), Err: err}
	if len(r.Values) > 0 {
		p.Values = make([]messages.SharedQuotaValue, 0, len(r.Values))
	}
	for _, v := range r.Values {
		p.Values = append(p.Values, messages.SharedQuotaValue{Dimension: v.Dimension, Model: v.Model, Flags: v.Flags, Limit: v.Limit, Used: v.Used,
			Remaining: v.Remaining, ResetAt: unixNano(v.ResetAt), Unit: v.Unit, Confidence: uint8(v.Confidence), Expires: unixNano(v.Expires)})
	}
	return p
}

// pollReading rebuilds the poll reading as the polling member's
// aggregator held it.
func pollReading(p *messages.SharedQuotaPoll) (quota.Reading, time.Time) {
	r := quota.Reading{Source: quota.SourceProviderAPI, Supported: true, Err: p.Err, Values: make([]quota.Value, 0, len(p.Values))}
	for _, w := range p.Values {
		r.Values = append(r.Values, quota.Value{Dimension: w.Dimension, Model: w.Model, Flags: w.Flags, Limit: w.Limit, Used: w.Used,
			Remaining: w.Remaining, ResetAt: fromUnixNano(w.ResetAt), Unit: w.Unit, Source: quota.SourceProviderAPI,
			Confidence: quota.Confidence(w.Confidence), Expires: fromUnixNano(w.Expires)})
	}
	return r, fromUnixNano(p.At)
}

// encodeHeaders is connection conn's header batch for the peers.
func encodeHeaders(conn string, obs []headerObserved) *messages.SharedQuotaHeaders {
	h := &messages.SharedQuotaHeaders{Conn: conn}
	if len(obs) > 0 {
		h.Observations = make([]messages.SharedQuotaObservation, 0, len(obs))
	}
	for _, o := range obs {
		w := messages.SharedQuotaObservation{Model: o.Model, At: unixNano(o.Obs.At)}
		if o.Obs.N > 0 {
			w.Readings = make([]messages.SharedQuotaReading, 0, o.Obs.N)
		}
		for i := 0; i < o.Obs.N; i++ {
			r := &o.Obs.Readings[i]
			w.Readings = append(w.Readings, messages.SharedQuotaReading{Dimension: r.Dimension, Flags: r.Flags, Limit: r.Limit, Remaining: r.Remaining,
				ResetAt: unixNano(r.ResetAt), Window: int64(r.Window)})
		}
		h.Observations = append(h.Observations, w)
	}
	return h
}

// decodeHeaders rebuilds a peer's header observations (the codec checked
// that each has at most messages.MaxQuotaReadings).
func decodeHeaders(ws []messages.SharedQuotaObservation) []headerObserved {
	out := make([]headerObserved, 0, len(ws))
	for _, w := range ws {
		o := &messages.QuotaObservation{N: len(w.Readings), At: fromUnixNano(w.At)}
		for i, r := range w.Readings {
			o.Readings[i] = messages.QuotaReading{Dimension: r.Dimension, Flags: r.Flags, Limit: r.Limit, Remaining: r.Remaining,
				ResetAt: fromUnixNano(r.ResetAt), Window: time.Duration(r.Window)}
		}
		out = append(out, headerObserved{Model: w.Model, Obs: o})
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
func fromTheFuture(m messages.ClusterMessage, now time.Time) {
	n := now.Add(maxPeerLead).UnixNano()
	back := func(t *int64, d int64) {
		if *t != 0 {
			*t -= d
		}
	}
	// lead brings an observation time more than maxPeerLead ahead back to
	// now and says by how much it moved it (0: it was not ahead).
	lead := func(at *int64) int64 {
		if *at <= n {
			return 0
		}
		d := *at - now.UnixNano()
		*at = now.UnixNano()
		return d
	}
	switch w := m.(type) {
	case *messages.SharedQuotaPoll:
		if d := lead(&w.At); d != 0 {
			for i := range w.Values {
				back(&w.Values[i].ResetAt, d)
				back(&w.Values[i].Expires, d)
			}
		}
	case *messages.SharedQuotaHeaders:
		for i := range w.Observations {
			o := &w.Observations[i]
			if d := lead(&o.At); d != 0 {
				for j := range o.Readings {
					back(&o.Readings[j].ResetAt, d)
				}
			}
		}
	}
}
