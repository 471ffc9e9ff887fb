// Package logging builds the gateway's slog logger from the environment
// settings and adapts other libraries' logging into it. Every logger it
// builds redacts secrets (internal/sanitize) from every record.
package logging

import (
	"context"
	"io"
	"log/slog"
)

// New returns a logger writing text or JSON at level to w. Every record
// is redacted (Redacting) before it is written.
func New(format, level string, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: ParseLevel(level)}
	if format == "json" {
		return Redacting(slog.New(slog.NewJSONHandler(w, opts)), nil)
	}
	return Redacting(slog.New(slog.NewTextHandler(w, opts)), nil)
}

// ParseLevel maps debug|info|warn|error (default info).
func ParseLevel(s string) slog.Level {
	switch s {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// AtLeast returns a logger that drops records below min, for chatty
// libraries (protoactor logs its start-up at INFO).
func AtLeast(l *slog.Logger, min slog.Level) *slog.Logger {
	return slog.New(minLevel{h: l.Handler(), min: min})
}

type minLevel struct {
	h   slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.h.Enabled(ctx, l)
}
func (m minLevel) Handle(ctx context.Context, r slog.Record) error { return m.h.Handle(ctx, r) }
func (m minLevel) WithAttrs(a []slog.Attr) slog.Handler {
	return minLevel{h: m.h.WithAttrs(a), min: m.min}
}
func (m minLevel) WithGroup(n string) slog.Handler { return minLevel{h: m.h.WithGroup(n), min: m.min} }
