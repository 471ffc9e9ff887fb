// Package etcdtest runs a real etcd (go.etcd.io/etcd/server/v3/embed) in
// a test process: one member on loopback with its own data directory and
// free ports, which a test can stop and start again as the same member to
// play an outage. It is its own package so that only the tests that need
// an etcd link its server.
package etcdtest

import (
	"fmt"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// Server is one embedded etcd member.
type Server struct {
	dir                  string
	clientPort, peerPort int
	mu                   sync.Mutex
	e                    *embed.Etcd
}

// Start runs a member and stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{dir: t.TempDir(), clientPort: FreePort(t), peerPort: FreePort(t)}
	s.Restart(t)
	t.Cleanup(s.Stop)
	return s
}

// Addr is the client endpoint, host:port.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.clientPort) }

// Stop stops the member (a no-op when it is stopped).
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.e != nil {
		s.e.Close()
		s.e = nil
	}
}

// Restart starts the member again on the same ports and data (it must be
// stopped) and waits until it serves.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	cfg := embed.NewConfig()
	cfg.Dir = s.dir
	cfg.LogLevel = "error"
	client := url.URL{Scheme: "http", Host: s.Addr()}
	peer := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", s.peerPort)}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("starting etcd: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(20 * time.Second):
		e.Close()
		t.Fatal("etcd did not become ready within 20 s")
	}
	s.e = e
}

// FreePort is a loopback port free a moment ago (for a server the test
// starts next).
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
