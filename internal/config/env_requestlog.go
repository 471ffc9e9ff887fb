package config

import (
	"fmt"
	"strings"
	"time"
)

// RequestLogEnv configures the request log (actors/requestlog) and its
// database (internal/store/sqlite, <data dir>/omniroute.db). They take
// effect once the request path is wired to the writer.
type RequestLogEnv struct {
	// Mode: db (the database), stdout (one slog line per request), both,
	// or off.
	Mode RequestLogMode `env:"OMNIROUTE_REQUEST_LOG" envDefault:"db"`
	// RetentionDays deletes request records older than this many days
	// (0 keeps them); usage aggregates are kept at least 62 days.
	RetentionDays Days `env:"OMNIROUTE_REQUEST_LOG_RETENTION_DAYS" envDefault:"30"`
}

// RequestLogMode is where request records go.
type RequestLogMode string

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (m *RequestLogMode) UnmarshalText(b []byte) error {
	switch v := strings.ToLower(strings.TrimSpace(string(b))); v {
	case "db", "stdout", "both", "off":
		*m = RequestLogMode(v)
		return nil
	}
	return fmt.Errorf("want db, stdout, both or off")
}

// DB reports whether records go to the database.
func (m RequestLogMode) DB() bool { return m == "db" || m == "both" }

// Stdout reports whether records are logged as slog lines.
func (m RequestLogMode) Stdout() bool { return m == "stdout" || m == "both" }

// MaxDays bounds a retention (100 years).
const MaxDays = 36500

// Days is a whole number of days, 0 to MaxDays.
type Days int

// UnmarshalText implements encoding.TextUnmarshaler for caarlos0/env.
func (d *Days) UnmarshalText(b []byte) error {
	n, err := parseNonNegative(string(b))
	if err != nil || n > MaxDays {
		return fmt.Errorf("want whole days between 0 and %d, such as 30", MaxDays)
	}
	*d = Days(n)
	return nil
}

// Duration converts to a time.Duration (0 stays 0: keep forever).
func (d Days) Duration() time.Duration { return time.Duration(d) * 24 * time.Hour }
