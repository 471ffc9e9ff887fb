package quota

import (
	"math"
	"time"

	"github.com/omniroute/gateway/internal/ascii"
)

// The parsers below read one header value each. They never allocate on the
// success path of the common formats, accept surrounding spaces, and treat
// anything negative, malformed or out of range as unknown (ok == false):
// an unknown value is never read as zero.

// trim drops spaces and tabs around b and, for repeated headers folded into
// one line ("5000, 5000"), everything from the first comma: the first value
// counts once.
func trimFirst(b []byte) []byte {
	for i, c := range b {
		if c == ',' {
			b = b[:i]
			break
		}
	}
	return trimSpace(b)
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// maxNumber bounds parsed numbers: larger values are garbage, not quota.
const maxNumber = 1e18

// ParseNumber reads a non-negative decimal number ("5000", "12.5"). Signs,
// exponents, hex and trailing text are rejected, so "-1" is unknown rather
// than 1 and "0x10" is unknown rather than 16.
func ParseNumber(b []byte) (float64, bool) {
	b = trimFirst(b)
	v, n, ok := decimal(b)
	if !ok || n != len(b) {
		return 0, false
	}
	return v, true
}

// decimal parses digits with an optional fraction at the start of b and
// returns the value and the bytes consumed.
func decimal(b []byte) (float64, int, bool) {
	m, scale, n, ok := fixed(b)
	if !ok {
		return 0, n, false
	}
	v := float64(m) / pow10[scale]
	if v > maxNumber {
		return 0, n, false
	}
	return v, n, true
}

var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18}

// fixed parses digits with an optional fraction as mantissa/10^scale, so
// "7.66" is exactly 766/100 (summing 0.6 and 0.06 in floating point is
// not). Fraction digits beyond what fits are dropped.
func fixed(b []byte) (mant uint64, scale int, n int, ok bool) {
	i, digits := 0, 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		if digits >= 18 {
			return 0, 0, i, false // too many digits to be a quota figure
		}
		mant = mant*10 + uint64(b[i]-'0')
		digits++
		i++
	}
	if digits == 0 {
		return 0, 0, i, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		frac := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			if digits < 18 {
				mant = mant*10 + uint64(b[i]-'0')
				scale++
				digits++
			}
			frac++
			i++
		}
		if frac == 0 {
			return 0, 0, i, false
		}
	}
	return mant, scale, i, true
}

// scaled returns mant/10^scale × unit as a duration, exactly where the
// result is a whole number of nanoseconds, or false past maxDelay.
func scaled(mant uint64, scale int, unit time.Duration) (time.Duration, bool) {
	div := uint64(1)
	for i := 0; i < scale; i++ {
		div *= 10
	}
	whole, frac := mant/div, mant%div
	if whole > uint64(maxDelay/unit) {
		return 0, false
	}
	d := time.Duration(whole)*unit + time.Duration(float64(frac)*float64(unit)/float64(div)+0.5)
	return d, d <= maxDelay
}

// maxDelay bounds relative times (about 10 years): beyond that a value is
// not a reset but garbage.
const maxDelay = 10 * 365 * 24 * time.Hour

func seconds(f float64) (time.Duration, bool) {
	d := f * 1e9
	if math.IsNaN(d) || d < 0 || d > float64(maxDelay) {
		return 0, false
	}
	return time.Duration(d), true
}

// ParseGoDuration reads a Go-style duration as OpenAI and Groq send resets:
// "6m0s" is 360 s, "2m59.56s", "12ms", "1h2m3s", "7.66s". A bare number is
// taken as seconds, which is what OpenAI-compatible servers mean by it.
// Negative values are unknown.
func ParseGoDuration(b []byte) (time.Duration, bool) {
	b = trimFirst(b)
	if len(b) == 0 {
		return 0, false
	}
	if m, sc, n, ok := fixed(b); ok && n == len(b) {
		return scaled(m, sc, time.Second)
	}
	var total time.Duration
	for len(b) > 0 {
		m, sc, n, ok := fixed(b)
		if !ok {
			return 0, false
		}
		b = b[n:]
		unit, un := durationUnit(b)
		if un == 0 {
			return 0, false
		}
		b = b[un:]
		d, ok := scaled(m, sc, unit)
		if !ok || total > maxDelay-d {
			return 0, false
		}
		total += d
	}
	return total, true
}

// durationUnit reads a Go duration unit at the start of b.
func durationUnit(b []byte) (time.Duration, int) {
	switch {
	case len(b) >= 2 && b[0] == 'n' && b[1] == 's':
		return time.Nanosecond, 2
	case len(b) >= 2 && b[0] == 'u' && b[1] == 's':
		return time.Microsecond, 2
	case len(b) >= 3 && b[0] == 0xC2 && b[1] == 0xB5 && b[2] == 's': // µs (micro sign)
		return time.Microsecond, 3
	case len(b) >= 3 && b[0] == 0xCE && b[1] == 0xBC && b[2] == 's': // μs (Greek mu)
		return time.Microsecond, 3
	case len(b) >= 2 && b[0] == 'm' && b[1] == 's':
		return time.Millisecond, 2
	case len(b) >= 1 && b[0] == 's':
		return time.Second, 1
	case len(b) >= 1 && b[0] == 'm':
		return time.Minute, 1
	case len(b) >= 1 && b[0] == 'h':
		return time.Hour, 1
	}
	return 0, 0
}

// ParseSeconds reads a relative number of seconds ("6", "0.5"), as Azure
// and Together send resets and Retry-After carries delta-seconds.
func ParseSeconds(b []byte) (time.Duration, bool) { return parseRelative(b, time.Second) }

// ParseMillis reads a relative number of milliseconds (retry-after-ms).
func ParseMillis(b []byte) (time.Duration, bool) { return parseRelative(b, time.Millisecond) }

// parseRelative reads a relative number of units: a decimal and nothing
// after it.
func parseRelative(b []byte, unit time.Duration) (time.Duration, bool) {
	b = trimFirst(b)
	m, sc, n, ok := fixed(b)
	if !ok || n != len(b) {
		return 0, false
	}
	return scaled(m, sc, unit)
}

// Epoch units.
const (
	epochAuto = iota
	epochSeconds
	epochMillis
)

// ParseEpoch reads an absolute Unix time in seconds or milliseconds. With
// auto, values above 1e12 are milliseconds, above 1e9 seconds, and smaller
// ones relative seconds (undocumented providers mix all three).
func ParseEpoch(b []byte, unit int, now time.Time) (time.Time, bool) {
	v, ok := ParseNumber(b)
	if !ok {
		return time.Time{}, false
	}
	switch unit {
	case epochSeconds:
		v *= 1000
	case epochMillis:
	default:
		switch {
		case v > 1e12:
		case v > 1e9:
			v *= 1000
		default:
			d, ok := seconds(v)
			if !ok {
				return time.Time{}, false
			}
			return now.Add(d), true
		}
	}
	if v > 4e15 { // past year 128000: garbage
		return time.Time{}, false
	}
	return time.UnixMilli(int64(v)), true
}

// ParseRFC3339 reads an absolute RFC 3339 timestamp, as Anthropic sends
// resets ("2025-08-21T12:40:59Z"). The plain UTC second form is parsed by
// hand; other forms (fractions, offsets) go through time.Parse.
func ParseRFC3339(b []byte) (time.Time, bool) {
	b = trimFirst(b)
	if t, ok := fastRFC3339(b); ok {
		return t, true
	}
	if len(b) < 20 || len(b) > 40 {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(b))
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}

func fastRFC3339(b []byte) (time.Time, bool) {
	if len(b) != 20 || b[4] != '-' || b[7] != '-' || (b[10] != 'T' && b[10] != 't') || b[13] != ':' || b[16] != ':' || (b[19] != 'Z' && b[19] != 'z') {
		return time.Time{}, false
	}
	num := func(s []byte) (int, bool) { // at most four digits: an int holds them
		n, ok := ascii.ParseDigits(s)
		return int(n), ok
	}
	y, ok1 := num(b[0:4])
	mo, ok2 := num(b[5:7])
	d, ok3 := num(b[8:10])
	h, ok4 := num(b[11:13])
	mi, ok5 := num(b[14:16])
	s, ok6 := num(b[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60 {
		return time.Time{}, false
	}
	t := time.Date(y, time.Month(mo), d, h, mi, s, 0, time.UTC)
	if t.Day() != d { // 31 February and friends
		return time.Time{}, false
	}
	return t, true
}

// httpDateLayouts are the three forms RFC 9110 allows for HTTP-date.
var httpDateLayouts = [...]string{"Mon, 02 Jan 2006 15:04:05 GMT", "Monday, 02-Jan-06 15:04:05 GMT", "Mon Jan _2 15:04:05 2006"}

// ParseRetryAfter reads a Retry-After value: delta-seconds or an HTTP-date
// (a date in the past means "now": 0). Negative or malformed is unknown.
func ParseRetryAfter(b []byte, now time.Time) (time.Duration, bool) {
	b = trimSpace(b)
	if d, ok := ParseSeconds(b); ok {
		return d, true
	}
	if len(b) < 20 || len(b) > 40 {
		return 0, false
	}
	s := string(b)
	for _, layout := range httpDateLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			d := t.Sub(now)
			if d < 0 {
				d = 0
			}
			if d > maxDelay {
				return 0, false
			}
			return d, true
		}
	}
	return 0, false
}
