package engines

import (
	"fmt"
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func decode(t *testing.T, extra string) *config.File {
	t.Helper()
	js := `{"providers":{"p":{"base_url":"http://127.0.0.1:1/v1","apis":["chat"],"connections":{"c":{}}}},
	"models":{"m":{"targets":[{"connection":"p"}]}}` + extra + `}`
	f, err := config.DecodeFile(strings.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func ids(es []*Engine) string {
	var out []string
	for _, e := range es {
		out = append(out, e.ID)
	}
	return strings.Join(out, ",")
}

func TestBuildAxesAndLookups(t *testing.T) {
	f := decode(t, `,
	"services": {
	  "bifrost": {"command": "bifrost", "port": 8080, "health_path": "/v1/models"},
	  "cliproxy": {"command": "cliproxy", "port": 8317, "health_path": "/v1/models"},
	  "mux": {"command": "mux", "health_path": "/health"}
	},
	"engines": {
	  "bifrost": {"lifecycle": "supervised", "relay": "relay", "capabilities": ["chat", "streaming"]},
	  "vibeproxy": {"lifecycle": "external", "relay": "provider", "base_url": "http://127.0.0.1:8318", "capabilities": ["chat", "vision"]},
	  "old": {"lifecycle": "disabled", "capabilities": ["chat"]}
	}`)
	r := Build(f, "")
	if got := ids(r.All()); got != "native,bifrost,old,vibeproxy,cliproxy,mux" {
		t.Fatalf("All = %s", got)
	}
	cases := []struct {
		id        string
		lifecycle Lifecycle
		role      RelayRole
		service   string
		port      int
		health    string
		source    string
	}{
		{"native", InProcess, RoleNative, "", 0, "", "builtin"},
		{"ts", InProcess, RoleNative, "", 0, "", "builtin"},
		{"bifrost", Supervised, RoleRelay, "bifrost", 8080, "/v1/models", "config"},
		{"vibeproxy", External, RoleProvider, "", 0, "", "config"},
		{"old", Disabled, RoleNone, "", 0, "", "config"},
		{"cliproxy", Supervised, RoleProvider, "cliproxy", 8317, "/v1/models", "service"},
	}
	for _, tc := range cases {
		e, ok := r.Get(tc.id)
		if !ok || e.Lifecycle != tc.lifecycle || e.Relay != tc.role || e.Service != tc.service || e.DefaultPort != tc.port || e.HealthPath != tc.health || e.Source != tc.source {
			t.Errorf("Get(%s) = %+v", tc.id, e)
		}
	}
	if _, ok := r.Get("nope"); ok {
		t.Fatal("unknown id found")
	}
	for _, tc := range []struct {
		c    Capability
		want string
	}{
		{Chat, "native,bifrost,vibeproxy"}, // "old" is disabled
		{Vision, "native,vibeproxy"},
		{NativeHotPath, "native"},
		{ModelSync, ""},
	} {
		if got := ids(r.WithCapability(tc.c)); got != tc.want {
			t.Errorf("WithCapability(%s) = %s; want %s", tc.c, got, tc.want)
		}
	}
	if rb := r.RelayBackend(); rb == nil || rb.ID != "bifrost" {
		t.Fatalf("RelayBackend = %+v", rb)
	}
}

func TestImpliedRelayEngines(t *testing.T) {
	cases := []struct {
		name, extra, env string
		want             string // id/lifecycle/source of the relay backend, or ""
	}{
		{"none", ``, "", ""},
		{"env only", ``, "http://10.0.0.5:8080", "bifrost/external/env"},
		{"service named bifrost", `,"services":{"bifrost":{"command":"bifrost","health_path":"/v1/models"}}`, "http://x:1", "bifrost/supervised/service"},
		{"declared wins over env", `,"engines":{"edge":{"lifecycle":"external","relay":"relay","base_url":"http://127.0.0.1:9"}}`, "http://x:1", "edge/external/config"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Build(decode(t, tc.extra), tc.env)
			got := ""
			if e := r.RelayBackend(); e != nil {
				got = fmt.Sprintf("%s/%s/%s", e.ID, e.Lifecycle, e.Source)
			}
			if got != tc.want {
				t.Fatalf("relay backend %q; want %q", got, tc.want)
			}
		})
	}
}

func TestDefaultFileRegistry(t *testing.T) {
	f, err := config.DefaultFile()
	if err != nil {
		t.Fatal(err)
	}
	r := Build(f, "")
	e, ok := r.Get("mockprovider")
	if !ok || e.Lifecycle != Supervised || e.Relay != RoleProvider || e.HealthPath != "/_mock/health" || !e.Has(Streaming) {
		t.Fatalf("mockprovider engine %+v", e)
	}
	if r.RelayBackend() != nil {
		t.Fatal("the default has no relay backend")
	}
}
