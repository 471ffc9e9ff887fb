// Package testutil holds helpers shared by the project's tests.
package testutil

import (
	"bytes"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// LeakOptions are the goleak options every package's TestMain uses. They
// ignore only goroutines that fasthttp owns and ends on its own schedule,
// none of which the gateway can stop:
//   - updateServerDate: one process-wide ticker started by the first server;
//   - a stopped server's worker-pool cleaner, which exits after its current
//     sleep (MaxIdleWorkerDuration);
//   - a HostClient's idle-connection cleaner, which exits after its current
//     sleep once no connection is left;
//   - the default TCP dialer's address-cache cleaner, one per process,
//     started by the first client that dials without its own Dial (the
//     benchmarks' clients) and never stopped by fasthttp.
//
// Everything else, including every goroutine the gateway starts, must be
// gone when the tests end.
func LeakOptions(extra ...goleak.Option) []goleak.Option {
	return append([]goleak.Option{
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
	}, extra...)
}

// SyncBuffer is a log sink that many goroutines write while a test reads
// it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// VerifyTestMain runs a package's tests and then fails the run if any
// goroutine is left beyond those LeakOptions ignores: every package's
// TestMain is this one call.
func VerifyTestMain(m *testing.M, extra ...goleak.Option) {
	goleak.VerifyTestMain(m, LeakOptions(extra...)...)
}
