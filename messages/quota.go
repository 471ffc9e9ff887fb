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
