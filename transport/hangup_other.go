//go:build !linux

package transport

import "log/slog"

// hangupWatcher is a no-op where epoll is unavailable: a vanished client's
// upstream call then ends at its next write or its timeout.
type hangupWatcher struct{}

func newHangupWatcher(*registry, *slog.Logger) *hangupWatcher { return &hangupWatcher{} }

func (*hangupWatcher) Close() {}
