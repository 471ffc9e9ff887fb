package logging

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/omniroute/gateway/internal/sanitize"
)

// Redacting returns a logger whose every record (message, attributes,
// groups, at every level and in either format) goes through r before it
// reaches l's handler: the gateway's one redaction path for logs. A
// logger that already redacts is re-wrapped around its inner handler, so
// the redactor with the most known secrets wins and nothing is redacted
// twice.
func Redacting(l *slog.Logger, r *sanitize.Redactor) *slog.Logger {
	h := l.Handler()
	if rh, ok := h.(*redactHandler); ok {
		h = rh.inner
	}
	return slog.New(&redactHandler{inner: h, r: r})
}

type redactHandler struct {
	inner slog.Handler
	r     *sanitize.Redactor
}

func (h *redactHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.inner.Handle(ctx, out)
}

func (h *redactHandler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = h.attr(a)
	}
	return &redactHandler{inner: h.inner.WithAttrs(red), r: h.r}
}

func (h *redactHandler) WithGroup(name string) slog.Handler {
	return &redactHandler{inner: h.inner.WithGroup(name), r: h.r}
}

// attr redacts one attribute: strings, and anything rendered as text
// (errors, Stringers, byte slices); numbers, times and booleans cannot
// hold a secret and keep their type.
func (h *redactHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, x := range g {
			red[i] = h.attr(x)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case []byte:
			return slog.String(a.Key, h.r.String(string(x)))
		case error:
			return slog.String(a.Key, h.r.String(x.Error()))
		default:
			return slog.String(a.Key, h.r.String(fmt.Sprint(x)))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
