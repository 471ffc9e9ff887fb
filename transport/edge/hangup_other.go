//go:build !linux

package edge

import (
	"log/slog"
	"net"
)

// hangupWatcher is a no-op where epoll is unavailable: a vanished client's
// upstream call then ends at its next write or its timeout.
type hangupWatcher struct{}

func newHangupWatcher(*Registry, *slog.Logger) *hangupWatcher { return &hangupWatcher{} }

func (*hangupWatcher) Close() {}

func (*hangupWatcher) watchable(net.Conn) bool { return false }
