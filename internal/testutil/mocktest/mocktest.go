// Package mocktest is test only: the mock provider in the test's own
// process, on a free loopback port, for as long as the test runs. Tests
// that drive a gateway (or a proxy, or a load generator) against the mock
// all need the same few steps, and the same cleanup; this is the one
// place that writes them.
package mocktest

import (
	"testing"

	"github.com/omniroute/gateway/internal/mockprovider"
)

// Start runs a mock provider with options o on 127.0.0.1 (a free port),
// closes it when t ends and, unless models is nil, sets their
// behaviour. It returns the server (its stats, its behaviour) and the
// host:port it listens on.
func Start(t testing.TB, o mockprovider.Options, models map[string]mockprovider.Behavior) (*mockprovider.Server, string) {
	t.Helper()
	mock := mockprovider.New(o)
	addr, err := mock.Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("starting the mock provider: %v", err)
	}
	t.Cleanup(func() { _ = mock.Close() })
	if models != nil {
		if err := mock.SetBehavior(mockprovider.BehaviorUpdate{Models: models}); err != nil {
			t.Fatalf("setting the mock provider's behaviour: %v", err)
		}
	}
	return mock, addr
}
