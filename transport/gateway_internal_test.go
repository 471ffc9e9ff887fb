package transport

import (
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/testutil"
)

// allocGateway is a gateway with one model whose provider is never
// called, and the environment variables given as name, value pairs.
func allocGateway(t testing.TB, vars ...string) *Gateway {
	t.Helper()
	f, err := config.DecodeFile(strings.NewReader(`{"providers":{"p":{"base_url":"http://127.0.0.1:9/v1","apis":["chat"],"auth":"none","connections":{"c":{}}}},
		"models":{"m":{"targets":[{"connection":"p/c"}]}},"auth":{"mode":"open","allow_anonymous":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{"OMNIROUTE_DATA_DIR": t.TempDir(), "OMNIROUTE_TENANT_SECRET": "test-secret-0123456789"}
	for i := 0; i+1 < len(vars); i += 2 {
		m[vars[i]] = vars[i+1]
	}
	env, err := config.LoadEnv(m)
	if err != nil {
		t.Fatal(err)
	}
	system := testutil.NewActorSystem()
	g, err := newForTest(system, Options{Env: env, File: f})
	if err != nil {
		system.Shutdown()
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(); system.Shutdown() })
	return g
}
