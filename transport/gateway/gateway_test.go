package gateway_test

import (
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/transport"
	"github.com/omniroute/gateway/transport/gateway"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// TestNewAndClose: New composes a gateway whose front end has its actors'
// handles attached and the catalog loaded, and Close stops them all
// (goleak checks no goroutine is left); a second gateway on the same data
// directory is refused while the first holds it, leaving nothing running.
func TestNewAndClose(t *testing.T) {
	f, err := transport.DecodeConfig(strings.NewReader(`{"providers":{"p":{"base_url":"http://127.0.0.1:9/v1","apis":["chat"],"auth":"none","connections":{"c":{}}}},
		"models":{"m":{"targets":[{"connection":"p/c"}]}},"auth":{"mode":"open","allow_anonymous":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	env, err := transport.LoadEnv(map[string]string{"OMNIROUTE_DATA_DIR": t.TempDir(), "OMNIROUTE_TENANT_SECRET": "test-secret-0123456789"})
	if err != nil {
		t.Fatal(err)
	}
	system := testutil.ActorSystem(t)
	g, err := gateway.New(system, gateway.Options{Env: env, File: f})
	if err != nil {
		t.Fatal(err)
	}
	if g.Targets() == nil || g.Ingest() == nil || g.Pressure() == nil || g.Lanes() == nil {
		t.Fatal("an actor handle is missing after New")
	}
	if m := g.Catalog().Resolve([]byte("m")); m == nil {
		t.Fatal("model m is not in the catalog")
	}
	if _, err := gateway.New(system, gateway.Options{Env: env, File: f}); err == nil || !strings.Contains(err.Error(), "in use by another gateway") {
		t.Fatalf("second gateway on the same data directory: %v, want the lock refused", err)
	}
	g.Close()
	g.Close() // idempotent
}

// TestNewWithoutFile: a missing config file is refused before anything is
// spawned.
func TestNewWithoutFile(t *testing.T) {
	system := testutil.ActorSystem(t)
	if _, err := gateway.New(system, gateway.Options{}); err == nil || !strings.Contains(err.Error(), "Options.File is nil") {
		t.Fatalf("New without a file: %v", err)
	}
}
