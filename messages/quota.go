package messages

import "time"

// QuotaDimension is what a quota value counts. The names follow the
// provider-neutral telemetry vocabulary of the reference.
type QuotaDimension uint8

// Quota dimensions.
const (
	DimUnknown QuotaDimension = iota
	DimRequests
	DimTokens
	DimInputTokens
	DimOutputTokens
	DimCredits
	DimCurrency
	DimDailyRequests
	DimWeeklyRequests
	DimMonthlyRequests
	DimRateLimit
	NumQuotaDimensions
)

var dimensionNames = [...]string{"unknown", "requests", "tokens", "input_tokens", "output_tokens", "credits",
	"currency", "daily_requests", "weekly_requests", "monthly_requests", "rate_limit"}

// String returns the wire name of the dimension.
func (d QuotaDimension) String() string {
	if int(d) < len(dimensionNames) {
		return dimensionNames[d]
	}
	return "unknown"
}

// ParseQuotaDimension maps a wire name to its dimension.
func ParseQuotaDimension(s string) (QuotaDimension, bool) {
	for i, n := range dimensionNames {
		if n == s {
			return QuotaDimension(i), true
		}
	}
	return DimUnknown, false
}

// Flags of a QuotaReading saying which numbers are known.
const (
	HasLimit uint8 = 1 << iota
	HasRemaining
	HasReset
)

// QuotaReading is one dimension as a response's headers reported it. A
// number that was missing, negative or unparseable is simply not flagged:
// unknown is never read as zero.
type QuotaReading struct {
	Dimension QuotaDimension
	Flags     uint8
	Limit     float64
	Remaining float64
	// ResetAt is when the dimension's window refills (absolute).
	ResetAt time.Time
	// Window is the length of the dimension's window as the mapping declares
	// it (a second, a minute, a day); 0 when unknown.
	Window time.Duration
}

// MaxQuotaReadings bounds the readings one response carries.
const MaxQuotaReadings = 8

// QuotaObservation is what one upstream response said about quota, parsed
// from its headers through the connection's explicit mapping. It holds no
// bytes of the response.
type QuotaObservation struct {
	Readings [MaxQuotaReadings]QuotaReading
	N        int
	// RetryAfter is the provider's retry hint (retry-after-ms wins over
	// retry-after); valid when HasRetryAfter.
	RetryAfter    time.Duration
	HasRetryAfter bool
	// At is when the response was received.
	At time.Time
}

// Empty reports an observation without readings or retry hint.
func (o *QuotaObservation) Empty() bool { return o == nil || (o.N == 0 && !o.HasRetryAfter) }

// ExhaustedUntil returns the latest reset among readings whose remaining is
// zero or less: how long the exhausted dimensions stay exhausted.
func (o *QuotaObservation) ExhaustedUntil() time.Time {
	var until time.Time
	if o == nil {
		return until
	}
	for i := 0; i < o.N; i++ {
		r := &o.Readings[i]
		if r.Flags&HasRemaining != 0 && r.Remaining <= 0 && r.Flags&HasReset != 0 && r.ResetAt.After(until) {
			until = r.ResetAt
		}
	}
	return until
}

// SharedQuotaValue is one value of a provider's usage API, as the member
// that polled it read it (actors/quota's Value, with times as Unix ns; 0:
// unknown or never).
type SharedQuotaValue struct {
	Dimension  QuotaDimension
	Model      string
	Flags      uint8
	Limit      float64
	Used       float64
	Remaining  float64
	ResetAt    int64
	Unit       string
	Confidence uint8
	Expires    int64
}

// SharedQuotaPoll is a connection's usage-API poll reading, which the one
// member that polls the connection (actors/quota's cluster actor picks it
// by rendezvous hashing) sends every other member's quota cluster actor,
// which feeds it to the connection's aggregator as a provider_api reading.
// It names the connection by name: ids are a member's own.
type SharedQuotaPoll struct {
	Conn string
	From string // the sending member's id
	// At is when the poll started (Unix ns).
	At     int64
	Err    string // the poll's error: the endpoint and status, never a credential
	Values []SharedQuotaValue
}

// ClusterKind implements ClusterMessage.
func (*SharedQuotaPoll) ClusterKind() ClusterKind { return KindSharedQuotaPoll }

// Validate implements ClusterMessage: a connection and a sender, known
// dimensions, finite numbers.
func (m *SharedQuotaPoll) Validate() error {
	if m.Conn == "" || m.From == "" {
		return invalid(KindSharedQuotaPoll, "no connection or no sender")
	}
	if len(m.Values) > MaxSharedQuotaItems {
		return invalid(KindSharedQuotaPoll, "%d values, more than %d", len(m.Values), MaxSharedQuotaItems)
	}
	for i := range m.Values {
		v := &m.Values[i]
		if v.Dimension >= NumQuotaDimensions || !finite(v.Limit, v.Used, v.Remaining) {
			return invalid(KindSharedQuotaPoll, "value %d: unknown dimension or a number that is not finite", i)
		}
	}
	return nil
}

func (m *SharedQuotaPoll) wire(c *wireCodec) {
	c.str(&m.Conn)
	c.str(&m.From)
	c.varint(&m.At)
	c.str(&m.Err)
	wireList(c, &m.Values, MaxSharedQuotaItems, 31, (*SharedQuotaValue).wire)
}

func (v *SharedQuotaValue) wire(c *wireCodec) {
	c.u8((*uint8)(&v.Dimension))
	c.str(&v.Model)
	c.u8(&v.Flags)
	c.f64(&v.Limit)
	c.f64(&v.Used)
	c.f64(&v.Remaining)
	c.varint(&v.ResetAt)
	c.str(&v.Unit)
	c.u8(&v.Confidence)
	c.varint(&v.Expires)
}

// SharedQuotaReading is one dimension of a response's rate-limit headers
// (QuotaReading, with times as Unix ns and the window in ns).
type SharedQuotaReading struct {
	Dimension QuotaDimension
	Flags     uint8
	Limit     float64
	Remaining float64
	ResetAt   int64 // 0: unknown
	Window    int64
}

// SharedQuotaObservation is one model's latest header observation.
type SharedQuotaObservation struct {
	Model    string
	At       int64 // when the response was received (Unix ns); never 0
	Readings []SharedQuotaReading
}

// SharedQuotaHeaders is a batch of a connection's header observations
// (the latest per model), which a member's header adapter coalesced and
// its quota cluster actor sends every other member's, which feeds them to
// the connection's header adapter as response_headers readings.
type SharedQuotaHeaders struct {
	Conn         string
	From         string // the sending member's id
	Observations []SharedQuotaObservation
}

// ClusterKind implements ClusterMessage.
func (*SharedQuotaHeaders) ClusterKind() ClusterKind { return KindSharedQuotaHeaders }

// Validate implements ClusterMessage: a connection and a sender, at most
// MaxQuotaReadings per observation, known dimensions, finite numbers.
func (m *SharedQuotaHeaders) Validate() error {
	if m.Conn == "" || m.From == "" {
		return invalid(KindSharedQuotaHeaders, "no connection or no sender")
	}
	if len(m.Observations) > MaxSharedQuotaItems {
		return invalid(KindSharedQuotaHeaders, "%d observations, more than %d", len(m.Observations), MaxSharedQuotaItems)
	}
	for i := range m.Observations {
		o := &m.Observations[i]
		if o.At == 0 || len(o.Readings) > MaxQuotaReadings {
			return invalid(KindSharedQuotaHeaders, "observation %d: no time, or more than %d readings", i, MaxQuotaReadings)
		}
		for j := range o.Readings {
			if r := &o.Readings[j]; r.Dimension >= NumQuotaDimensions || !finite(r.Limit, r.Remaining) {
				return invalid(KindSharedQuotaHeaders, "observation %d, reading %d: unknown dimension or a number that is not finite", i, j)
			}
		}
	}
	return nil
}

func (m *SharedQuotaHeaders) wire(c *wireCodec) {
	c.str(&m.Conn)
	c.str(&m.From)
	wireList(c, &m.Observations, MaxSharedQuotaItems, 3, (*SharedQuotaObservation).wire)
}

func (o *SharedQuotaObservation) wire(c *wireCodec) {
	c.str(&o.Model)
	c.varint(&o.At)
	wireList(c, &o.Readings, MaxQuotaReadings, 20, (*SharedQuotaReading).wire)
}

func (x *SharedQuotaReading) wire(c *wireCodec) {
	c.u8((*uint8)(&x.Dimension))
	c.u8(&x.Flags)
	c.f64(&x.Limit)
	c.f64(&x.Remaining)
	c.varint(&x.ResetAt)
	c.varint(&x.Window)
}

// QuotaObserved carries one target's latest rate-limit headers from the
// targets actor (which takes them with each attempt's AttemptFinished) to
// its observation subscriber: the composition root's link, which hands
// them to the quota actor of the target's connection and to the ledger
// slot of its upstream model. Obs is never modified after sending.
type QuotaObserved struct {
	Target int
	Obs    *QuotaObservation
}
