package cluster

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

func TestQuietLogsDemotesRoutineClusterErrors(t *testing.T) {
	f := func(level slog.Level, msg string, shown bool) {
		t.Helper()
		var buf bytes.Buffer
		l := slog.New(QuietLogs(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
		l.Log(context.Background(), level, msg, "address", "127.0.0.1:1")
		if got := strings.Contains(buf.String(), msg); got != shown {
			t.Fatalf("%s %q: logged=%v, want %v (%s)", level, msg, got, shown, buf.String())
		}
	}
	f(slog.LevelError, "EndpointWriter lost connection", false)
	f(slog.LevelWarn, "Got gossip request from unknown member", false)
	f(slog.LevelError, "EndpointWriter failed to connect", true) // kept, as a warning
	f(slog.LevelError, "something else failed", true)
	f(slog.LevelDebug, "something else", false)

	var buf bytes.Buffer
	l := slog.New(QuietLogs(slog.NewTextHandler(&buf, nil)))
	l.Error("EndpointWriter failed to connect")
	if !strings.Contains(buf.String(), "level=WARN") {
		t.Fatalf("a member that cannot be reached is not logged as a warning: %s", buf.String())
	}
}
