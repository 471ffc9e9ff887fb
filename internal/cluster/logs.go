package cluster

import (
	"context"
	"log/slog"
	"time"
)

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// quiet are protoactor messages logged at error or warning level on
// ordinary events: a member that leaves or shuts down ends its streams
// ("lost connection", "error when closing"), and a member that has just
// joined is gossiped to before the others know it. They are demoted to
// debug so that an operator's error log holds only real failures; a member
// that cannot be reached at all still logs "EndpointWriter failed to
// connect" at warning level.
var quiet = map[string]slog.Level{
	"EndpointWriter lost connection":                    slog.LevelDebug,
	"EndpointWriter error when closing the stream":      slog.LevelDebug,
	"EndpointWriter error when closing the client conn": slog.LevelDebug,
	"Got gossip request from unknown member":            slog.LevelDebug,
	"EndpointWriter failed to connect":                  slog.LevelWarn,
	"Failed to keepWatching.":                           slog.LevelWarn,
}

// QuietLogs wraps the actor system's log handler (itself the gateway's
// redacting handler) so that protoactor's routine cluster messages are
// logged at the level they deserve (see quiet).
func QuietLogs(h slog.Handler) slog.Handler { return quietHandler{h} }

type quietHandler struct{ h slog.Handler }

func (q quietHandler) Enabled(ctx context.Context, l slog.Level) bool {
	// A demoted record must still reach Handle to be judged there.
	return l >= slog.LevelWarn || q.h.Enabled(ctx, l)
}

func (q quietHandler) Handle(ctx context.Context, r slog.Record) error {
	if l, ok := quiet[r.Message]; ok && l < r.Level {
		r.Level = l
	}
	if !q.h.Enabled(ctx, r.Level) {
		return nil
	}
	return q.h.Handle(ctx, r)
}

func (q quietHandler) WithAttrs(a []slog.Attr) slog.Handler { return quietHandler{q.h.WithAttrs(a)} }
func (q quietHandler) WithGroup(n string) slog.Handler      { return quietHandler{q.h.WithGroup(n)} }
