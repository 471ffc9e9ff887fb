package transport

import "time"

// SetLogsHeartbeat shortens the logs stream heartbeat for a test; call the
// returned func (after the gateway stopped) to restore it.
func SetLogsHeartbeat(d time.Duration) (restore func()) {
	old := logsHeartbeat
	logsHeartbeat = d
	return func() { logsHeartbeat = old }
}
