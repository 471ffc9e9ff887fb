package config

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/omniroute/gateway/internal/ascii"
)

// Millis is a duration given in whole milliseconds, the unit every
// *_MS variable uses. It rejects units ("2s") and fractions so that a typo
// stops start-up instead of silently meaning something else.
type Millis int64

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (m *Millis) UnmarshalText(b []byte) error {
	return setWhole(m, b, 0, math.MaxInt64, "want whole milliseconds (a non-negative integer such as 30000)")
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
	n, ok := parseNonNegative(s)
	if !ok || (mult > 1 && n > (1<<62)/mult) {
		return 0, fmt.Errorf("want a byte count (a non-negative integer, optionally with KiB, MiB or GiB, such as 4MiB)")
	}
	return n * mult, nil
}

// PositiveInt is an integer that must be at least 1.
type PositiveInt int

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (p *PositiveInt) UnmarshalText(b []byte) error {
	return setWhole(p, b, 1, 1<<31-1, "want a positive integer (1 or more)")
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
	return setWord(l, b, "want text or json", "text", "json")
}

// LogLevel is the minimum slog level.
type LogLevel string

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (l *LogLevel) UnmarshalText(b []byte) error {
	return setWord(l, b, "want debug, info, warn or error", "debug", "info", "warn", "error")
}

// parseNonNegative accepts only ASCII digits (no sign, no spaces inside, no
// exponent), so "1e3", "-1" and "2000ms" are refused rather than guessed
// at; so is a value past the largest int64. Each caller words its own
// error: what the variable takes.
func parseNonNegative(s string) (int64, bool) {
	return ascii.ParseDigits([]byte(strings.TrimSpace(s)))
}

// setWhole is the UnmarshalText of the whole-number types: it stores the
// number b spells (parseNonNegative) in *dst when it lies in [lo, hi],
// and otherwise returns want, the error that says what the variable takes.
func setWhole[T ~int | ~int64](dst *T, b []byte, lo, hi int64, want string) error {
	n, ok := parseNonNegative(string(b))
	if !ok || n < lo || n > hi {
		return errors.New(want)
	}
	*dst = T(n)
	return nil
}

// setNumber is setWhole for the fractional types: a decimal in [lo, hi]
// (never NaN).
func setNumber[T ~float64](dst *T, b []byte, lo, hi float64, want string) error {
	f, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil || math.IsNaN(f) || f < lo || f > hi {
		return errors.New(want)
	}
	*dst = T(f)
	return nil
}

// setWord is the UnmarshalText of the word types: b, trimmed and in lower
// case, must be one of words; otherwise it returns want.
func setWord[T ~string](dst *T, b []byte, want string, words ...string) error {
	v := strings.ToLower(strings.TrimSpace(string(b)))
	if !slices.Contains(words, v) {
		return errors.New(want)
	}
	*dst = T(v)
	return nil
}
