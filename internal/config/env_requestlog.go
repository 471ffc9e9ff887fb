package config

import (
	"fmt"
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
	return setWord(m, b, "want db, stdout, both or off", "db", "stdout", "both", "off")
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
	return setWhole(d, b, 0, MaxDays, fmt.Sprintf("want whole days between 0 and %d, such as 30", MaxDays))
}

// Duration converts to a time.Duration (0 stays 0: keep forever).
func (d Days) Duration() time.Duration { return time.Duration(d) * 24 * time.Hour }
