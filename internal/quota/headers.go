package quota

import (
	"fmt"
	"strings"
	"time"

	"github.com/omniroute/gateway/internal/enum"
	"github.com/omniroute/gateway/messages"
)

// ResetUnit declares how a mapping's reset header is written. Identical
// header names carry different units across providers (OpenAI sends Go
// durations, Azure seconds, xAI epoch seconds), so the unit belongs to the
// mapping, never to the header name.
type ResetUnit uint8

// Reset units.
const (
	ResetNone         ResetUnit = iota
	ResetGoDuration             // "6m0s", relative
	ResetSeconds                // "6", relative
	ResetMillis                 // "5830", relative
	ResetRFC3339                // "2025-08-21T12:40:59Z", absolute
	ResetEpochSeconds           // absolute Unix seconds
	ResetEpochMillis            // absolute Unix milliseconds
	ResetEpochAuto              // >1e12 ms, >1e9 s, else relative seconds
)

var resetUnitNames = [...]string{"", "go_duration", "seconds", "milliseconds", "rfc3339", "epoch_seconds", "epoch_milliseconds", "epoch_auto"}

// ParseResetUnit maps a config name to its unit.
func ParseResetUnit(s string) (ResetUnit, bool) { return enum.Parse[ResetUnit](resetUnitNames[:], s) }

// ResetUnitNames lists the config names of the units.
func ResetUnitNames() []string { return append([]string(nil), resetUnitNames[1:]...) }

// String returns the config name.
func (u ResetUnit) String() string { return enum.Name(resetUnitNames[:], u, "") }

// Field maps one dimension to its headers. Names are lower case.
type Field struct {
	Dimension messages.QuotaDimension
	Limit     string
	Remaining string
	Reset     string
	ResetUnit ResetUnit
	// Window is the dimension's metering window (a second for Together, a
	// day for Groq's request count); it bounds how long a reading without a
	// reset stays evidence, and only per-minute dimensions feed the ledger.
	Window time.Duration
	// Unit is what the numbers count ("requests", "tokens").
	Unit string
}

// Mapping is one provider family's explicit header mapping. Headers that
// are not named here are never read.
type Mapping struct {
	Family string
	Fields []Field
	index  map[string]headerRef
}

type headerRef struct {
	field int
	part  uint8 // partLimit, partRemaining, partReset
}

const (
	partLimit = iota
	partRemaining
	partReset
	partRetryAfterMS
	partMSRetryAfterMS
	partRetryAfter
)

// NewMapping validates fields and builds the lookup index.
func NewMapping(family string, fields []Field) (*Mapping, error) {
	if len(fields) == 0 || len(fields) > messages.MaxQuotaReadings {
		return nil, fmt.Errorf("a header mapping needs 1 to %d dimensions, got %d", messages.MaxQuotaReadings, len(fields))
	}
	m := &Mapping{Family: family, Fields: fields, index: map[string]headerRef{}}
	for i := range m.Fields {
		f := &m.Fields[i]
		if f.Limit == "" && f.Remaining == "" {
			return nil, fmt.Errorf("dimension %s: name a limit or a remaining header", f.Dimension)
		}
		if f.Reset != "" && f.ResetUnit == ResetNone {
			return nil, fmt.Errorf("dimension %s: reset header %q needs a reset unit", f.Dimension, f.Reset)
		}
		for part, name := range [...]string{f.Limit, f.Remaining, f.Reset} {
			if name == "" {
				continue
			}
			name = strings.ToLower(name)
			if _, dup := m.index[name]; dup {
				return nil, fmt.Errorf("header %q is mapped twice", name)
			}
			if isRetryHeader(name) {
				return nil, fmt.Errorf("header %q is the retry hint, read for every provider; do not map it", name)
			}
			m.index[name] = headerRef{field: i, part: uint8(part)}
		}
	}
	return m, nil
}

func isRetryHeader(name string) bool {
	return name == "retry-after" || name == "retry-after-ms" || name == "x-ms-retry-after-ms"
}

const (
	second = time.Second
	minute = time.Minute
	day    = 24 * time.Hour
)

func must(m *Mapping, err error) *Mapping {
	if err != nil {
		panic(err)
	}
	return m
}

func openAIStyle(family string, reqDim messages.QuotaDimension, reqWindow time.Duration, unit ResetUnit) *Mapping {
	return must(NewMapping(family, []Field{
		{Dimension: reqDim, Limit: "x-ratelimit-limit-requests", Remaining: "x-ratelimit-remaining-requests", Reset: "x-ratelimit-reset-requests", ResetUnit: unit, Window: reqWindow, Unit: "requests"},
		{Dimension: messages.DimTokens, Limit: "x-ratelimit-limit-tokens", Remaining: "x-ratelimit-remaining-tokens", Reset: "x-ratelimit-reset-tokens", ResetUnit: unit, Window: minute, Unit: "tokens"},
	}))
}

// families are the built-in mappings, by config name.
var families = map[string]*Mapping{
	// OpenAI: RPM and TPM; resets are Go durations until the bucket is full.
	"openai": openAIStyle("openai", messages.DimRequests, minute, ResetGoDuration),
	// Groq: the same names, but the request limit is per day.
	"groq": openAIStyle("groq", messages.DimDailyRequests, day, ResetGoDuration),
	// Azure OpenAI: the same names with resets in whole seconds.
	"azure": openAIStyle("azure", messages.DimRequests, minute, ResetSeconds),
	// xAI: OpenAI's names with resets as Unix seconds.
	"xai": openAIStyle("xai", messages.DimRequests, minute, ResetEpochSeconds),
	// Anthropic: four dimensions, RFC 3339 resets.
	"anthropic": must(NewMapping("anthropic", []Field{
		{Dimension: messages.DimRequests, Limit: "anthropic-ratelimit-requests-limit", Remaining: "anthropic-ratelimit-requests-remaining", Reset: "anthropic-ratelimit-requests-reset", ResetUnit: ResetRFC3339, Window: minute, Unit: "requests"},
		{Dimension: messages.DimTokens, Limit: "anthropic-ratelimit-tokens-limit", Remaining: "anthropic-ratelimit-tokens-remaining", Reset: "anthropic-ratelimit-tokens-reset", ResetUnit: ResetRFC3339, Window: minute, Unit: "tokens"},
		{Dimension: messages.DimInputTokens, Limit: "anthropic-ratelimit-input-tokens-limit", Remaining: "anthropic-ratelimit-input-tokens-remaining", Reset: "anthropic-ratelimit-input-tokens-reset", ResetUnit: ResetRFC3339, Window: minute, Unit: "tokens"},
		{Dimension: messages.DimOutputTokens, Limit: "anthropic-ratelimit-output-tokens-limit", Remaining: "anthropic-ratelimit-output-tokens-remaining", Reset: "anthropic-ratelimit-output-tokens-reset", ResetUnit: ResetRFC3339, Window: minute, Unit: "tokens"},
	})),
	// Together: requests and tokens per second.
	"together": must(NewMapping("together", []Field{
		{Dimension: messages.DimRequests, Limit: "x-ratelimit-limit", Remaining: "x-ratelimit-remaining", Reset: "x-ratelimit-reset", ResetUnit: ResetSeconds, Window: second, Unit: "requests"},
		{Dimension: messages.DimTokens, Limit: "x-tokenlimit-limit", Remaining: "x-tokenlimit-remaining", Window: second, Unit: "tokens"},
	})),
	// Mistral: tokens per minute under three header families seen over time;
	// the first one present wins.
	"mistral": must(NewMapping("mistral", []Field{
		{Dimension: messages.DimTokens, Limit: "x-ratelimit-limit-tokens-minute", Remaining: "x-ratelimit-remaining-tokens-minute", Window: minute, Unit: "tokens"},
		{Dimension: messages.DimTokens, Limit: "ratelimitbysize-limit", Remaining: "ratelimitbysize-remaining", Reset: "ratelimitbysize-reset", ResetUnit: ResetSeconds, Window: minute, Unit: "tokens"},
		{Dimension: messages.DimTokens, Limit: "x-ratelimitbysize-limit-minute", Remaining: "x-ratelimitbysize-remaining-minute", Window: minute, Unit: "tokens"},
	})),
	// Cerebras: requests per day and tokens per minute, resets in seconds.
	"cerebras": must(NewMapping("cerebras", []Field{
		{Dimension: messages.DimDailyRequests, Limit: "x-ratelimit-limit-requests-day", Remaining: "x-ratelimit-remaining-requests-day", Reset: "x-ratelimit-reset-requests-day", ResetUnit: ResetSeconds, Window: day, Unit: "requests"},
		{Dimension: messages.DimTokens, Limit: "x-ratelimit-limit-tokens-minute", Remaining: "x-ratelimit-remaining-tokens-minute", Reset: "x-ratelimit-reset-tokens-minute", ResetUnit: ResetSeconds, Window: minute, Unit: "tokens"},
	})),
	// OpenRouter: only on its own 429s; reset undocumented (epoch ms seen).
	"openrouter": must(NewMapping("openrouter", []Field{
		{Dimension: messages.DimRequests, Limit: "x-ratelimit-limit", Remaining: "x-ratelimit-remaining", Reset: "x-ratelimit-reset", ResetUnit: ResetEpochAuto, Window: minute, Unit: "requests"},
	})),
}

// Family returns the built-in mapping of a family name; "" and "none"
// return nil (no headers are read).
func Family(name string) (*Mapping, bool) {
	if name == "" || name == "none" {
		return nil, true
	}
	m, ok := families[name]
	return m, ok
}

// FamilyNames lists the built-in families (plus "none" and "custom").
func FamilyNames() []string {
	return []string{"openai", "groq", "azure", "xai", "anthropic", "together", "mistral", "cerebras", "openrouter", "custom", "none"}
}

// Builder parses one response's headers into an observation. Feed it every
// header with Header, then call Finish. It keeps no reference to the bytes.
type Builder struct {
	m       *Mapping
	now     time.Time
	obs     *messages.QuotaObservation
	read    [messages.MaxQuotaReadings]messages.QuotaReading
	seen    uint64 // bit per (field, part) and per retry header: first wins
	retryMS time.Duration
	msRetry time.Duration
	retry   time.Duration
	lower   [64]byte
}

// Reset prepares b for a response received at now, parsed with m (which
// may be nil: only the retry hint is read then).
func (b *Builder) Reset(m *Mapping, now time.Time) {
	*b = Builder{m: m, now: now}
}

// Header offers one response header. Names are matched case-insensitively;
// a repeated header counts once (the first occurrence).
func (b *Builder) Header(name, value []byte) {
	if len(name) > len(b.lower) || len(name) == 0 {
		return
	}
	l := b.lower[:len(name)]
	for i, c := range name {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		l[i] = c
	}
	switch string(l) {
	case "retry-after-ms":
		if b.once(60) {
			if d, ok := ParseMillis(value); ok {
				b.retryMS = d + 1
			}
		}
		return
	case "x-ms-retry-after-ms":
		if b.once(61) {
			if d, ok := ParseMillis(value); ok {
				b.msRetry = d + 1
			}
		}
		return
	case "retry-after":
		if b.once(62) {
			if d, ok := ParseRetryAfter(value, b.now); ok {
				b.retry = d + 1
			}
		}
		return
	}
	if b.m == nil {
		return
	}
	ref, ok := b.m.index[string(l)]
	if !ok || !b.once(uint(ref.field*3)+uint(ref.part)) {
		return
	}
	f := &b.m.Fields[ref.field]
	r := &b.read[ref.field]
	switch ref.part {
	case partLimit:
		if v, ok := ParseNumber(value); ok {
			r.Limit, r.Flags = v, r.Flags|messages.HasLimit
		}
	case partRemaining:
		if v, ok := ParseNumber(value); ok {
			r.Remaining, r.Flags = v, r.Flags|messages.HasRemaining
		}
	case partReset:
		if t, ok := parseReset(value, f.ResetUnit, b.now); ok {
			r.ResetAt, r.Flags = t, r.Flags|messages.HasReset
		}
	}
}

// once marks bit and reports whether it was unset.
func (b *Builder) once(bit uint) bool {
	if b.seen&(1<<bit) != 0 {
		return false
	}
	b.seen |= 1 << bit
	return true
}

func parseReset(v []byte, u ResetUnit, now time.Time) (time.Time, bool) {
	switch u {
	case ResetGoDuration:
		if d, ok := ParseGoDuration(v); ok {
			return now.Add(d), true
		}
	case ResetSeconds:
		if d, ok := ParseSeconds(v); ok {
			return now.Add(d), true
		}
	case ResetMillis:
		if d, ok := ParseMillis(v); ok {
			return now.Add(d), true
		}
	case ResetRFC3339:
		return ParseRFC3339(v)
	case ResetEpochSeconds:
		return ParseEpoch(v, epochSeconds, now)
	case ResetEpochMillis:
		return ParseEpoch(v, epochMillis, now)
	case ResetEpochAuto:
		return ParseEpoch(v, epochAuto, now)
	}
	return time.Time{}, false
}

// Finish writes the observation into obs and reports whether it holds
// anything. Dimensions without a limit or remaining are dropped (a reset
// alone says nothing), a zero limit is unknown and makes a zero remaining
// unknown too (Azure and others send 0/0 when they do not meter), and of several fields for the
// same dimension the first with numbers wins.
func (b *Builder) Finish(obs *messages.QuotaObservation) bool {
	*obs = messages.QuotaObservation{At: b.now}
	switch {
	case b.retryMS > 0:
		obs.RetryAfter, obs.HasRetryAfter = b.retryMS-1, true
	case b.msRetry > 0:
		obs.RetryAfter, obs.HasRetryAfter = b.msRetry-1, true
	case b.retry > 0:
		obs.RetryAfter, obs.HasRetryAfter = b.retry-1, true
	}
	if b.m != nil {
		var dims uint32
		for i := range b.m.Fields {
			r := b.read[i]
			f := &b.m.Fields[i]
			if r.Flags&messages.HasLimit != 0 && r.Limit == 0 {
				// A zero limit is what providers send when they do not
				// meter; with it, a zero remaining means nothing either.
				r.Flags &^= messages.HasLimit
				if r.Remaining == 0 {
					r.Flags &^= messages.HasRemaining
				}
			}
			if r.Flags&(messages.HasLimit|messages.HasRemaining) == 0 || dims&(1<<f.Dimension) != 0 {
				continue
			}
			dims |= 1 << f.Dimension
			r.Dimension, r.Window = f.Dimension, f.Window
			obs.Readings[obs.N] = r
			obs.N++
		}
	}
	return obs.N > 0 || obs.HasRetryAfter
}

// ReadingValue turns a header reading into a telemetry value for model.
func ReadingValue(r *messages.QuotaReading, model string, at time.Time, unit string) Value {
	v := Value{Dimension: r.Dimension, Model: model, Source: SourceResponseHeaders, Confidence: ConfidenceHigh, Unit: unit}
	if r.Flags&messages.HasLimit != 0 {
		v.Limit, v.Flags = r.Limit, v.Flags|HasLimit
	}
	if r.Flags&messages.HasRemaining != 0 {
		v.Remaining, v.Flags = r.Remaining, v.Flags|HasRemaining
	}
	if v.Known(HasLimit) && v.Known(HasRemaining) && v.Limit >= v.Remaining {
		v.Used, v.Flags = v.Limit-v.Remaining, v.Flags|HasUsed
	}
	horizon := r.Window
	if horizon <= 0 {
		horizon = minute
	}
	v.Expires = at.Add(horizon)
	if r.Flags&messages.HasReset != 0 {
		v.ResetAt = r.ResetAt
		v.Expires = r.ResetAt
		if !v.Expires.After(at) {
			v.Expires = at.Add(time.Millisecond)
		}
	}
	return v
}

// UnitOf returns the declared unit of a dimension in m ("" if not mapped).
func (m *Mapping) UnitOf(d messages.QuotaDimension) string {
	if m == nil {
		return ""
	}
	for i := range m.Fields {
		if m.Fields[i].Dimension == d {
			return m.Fields[i].Unit
		}
	}
	return ""
}
