package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Millis is a duration given in whole milliseconds, the unit every
// *_MS variable uses. It rejects units ("2s") and fractions so that a typo
// stops start-up instead of silently meaning something else.
type Millis int64

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (m *Millis) UnmarshalText(b []byte) error {
	n, err := parseNonNegative(string(b))
	if err != nil {
		return fmt.Errorf("want whole milliseconds (a non-negative integer such as 30000)")
	}
	*m = Millis(n)
	return nil
}

// Duration converts to a time.Duration.
func (m Millis) Duration() time.Duration { return time.Duration(m) * time.Millisecond }

// Bytes is a size in bytes. It accepts a plain integer or an integer with a
// binary suffix (KiB, MiB, GiB) because "52428800" is hard to read and easy
// to get wrong by a digit.
type Bytes int64

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (b *Bytes) UnmarshalText(t []byte) error {
	n, err := ParseBytes(string(t))
	if err != nil {
		return err
	}
	*b = Bytes(n)
	return nil
}

// ParseBytes parses "1048576", "1024KiB", "1MiB" or "1GiB".
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, suf := range []struct {
		s string
		m int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if strings.HasSuffix(s, suf.s) {
			mult = suf.m
			s = strings.TrimSpace(strings.TrimSuffix(s, suf.s))
			break
		}
	}
	n, err := parseNonNegative(s)
	if err != nil || (mult > 1 && n > (1<<62)/mult) {
		return 0, fmt.Errorf("want a byte count (a non-negative integer, optionally with KiB, MiB or GiB, such as 4MiB)")
	}
	return n * mult, nil
}

// PositiveInt is an integer that must be at least 1.
type PositiveInt int

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (p *PositiveInt) UnmarshalText(b []byte) error {
	n, err := parseNonNegative(string(b))
	if err != nil || n < 1 || n > 1<<31-1 {
		return fmt.Errorf("want a positive integer (1 or more)")
	}
	*p = PositiveInt(n)
	return nil
}

// Flag is a strict boolean: true, false, 1 or 0 (any case). strconv.ParseBool
// would also take "t" and "F", which read like typos in an env file.
type Flag bool

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (f *Flag) UnmarshalText(b []byte) error {
	switch strings.ToLower(strings.TrimSpace(string(b))) {
	case "true", "1":
		*f = true
	case "false", "0":
		*f = false
	default:
		return fmt.Errorf("want true, false, 1 or 0")
	}
	return nil
}

// LogFormat selects the slog handler.
type LogFormat string

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (l *LogFormat) UnmarshalText(b []byte) error {
	switch v := strings.ToLower(strings.TrimSpace(string(b))); v {
	case "text", "json":
		*l = LogFormat(v)
		return nil
	}
	return fmt.Errorf("want text or json")
}

// LogLevel is the minimum slog level.
type LogLevel string

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (l *LogLevel) UnmarshalText(b []byte) error {
	switch v := strings.ToLower(strings.TrimSpace(string(b))); v {
	case "debug", "info", "warn", "error":
		*l = LogLevel(v)
		return nil
	}
	return fmt.Errorf("want debug, info, warn or error")
}

// parseNonNegative accepts only ASCII digits (no sign, no spaces inside, no
// exponent), so "1e3", "-1" and "2000ms" are errors rather than guesses.
func parseNonNegative(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("not a non-negative integer")
		}
	}
	return strconv.ParseInt(s, 10, 64)
}
