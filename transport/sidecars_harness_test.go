package transport_test

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/omniroute/gateway/actors/services"
	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/svctest"
	"github.com/omniroute/gateway/transport"
	"github.com/omniroute/gateway/transport/gateway"
)

// gwOpts are the extras the sidecar tests need over startGateway.
type gwOpts struct {
	env    map[string]string
	clock  clock.Clock
	listen string // default 127.0.0.1:0
	// pressure replaces the resource sampler (nil: the process's own).
	pressure func() transport.PressureSample
}

// cpuUnknown is a resource sample with no figure known (memory, PSI,
// CPU), as on a platform without them: for tests whose subject is the
// controller following its provider, not the machine they run on (a
// loaded CI machine's CPU would turn latency evidence off, see
// docs/admission.md "A used-up CPU is not a queue").
func cpuUnknown() transport.PressureSample {
	return transport.PressureSample{GoUsed: -1, GoLimit: -1, CgroupCurrent: -1, CgroupFile: -1, CgroupMax: -1, CgroupHigh: -1,
		OOM: -1, OOMKill: -1, PSISome: -1, PSIFull: -1, CPUBusy: -1, CPUTotal: -1, CgroupCPUUsage: -1, CgroupThrottled: -1}
}

// startGW is startGateway with an injected clock, a listen address and
// relay token variables.
func startGW(t *testing.T, f *config.File, o gwOpts) *gwEnv {
	t.Helper()
	if err := f.Validate(); err != nil {
		t.Fatalf("test config: %v", err)
	}
	getenv := func(k string) (string, bool) {
		if v, ok := testGetenv(k); ok {
			return v, true
		}
		if k == "RELAY_CI_TOKEN" {
			return "rt-ci", true
		}
		return "", false
	}
	if o.listen == "" {
		o.listen = "127.0.0.1:0"
	}
	g := serveGateway(t, f, o.env, gateway.Options{Getenv: getenv, Clock: o.clock, PressureSample: o.pressure}, o.listen)
	// An answer proves Serve runs: a Shutdown before Serve registered the
	// listener would not stop it, and a test that fails at once would hang.
	if resp, err := g.hc.Get(g.base + "/api/monitoring/health"); err == nil {
		resp.Body.Close()
	}
	return g
}

// do sends any request: a body goes as JSON (send sets headers exactly).
func (g *gwEnv) do(method, path, body string, headers ...string) response {
	g.t.Helper()
	if body != "" {
		headers = append([]string{"Content-Type", "application/json"}, headers...)
	}
	return g.send(method, path, body, headers...)
}

// svcConfig is a helper service (this test binary in svctest mode).
func svcConfig(mode string, mutate func(*config.ServiceConfig)) config.ServiceConfig {
	c := config.ServiceConfig{
		Command:          config.SelfCommand,
		Env:              map[string]string{svctest.ModeEnv: mode, svctest.AddrEnv: "{addr}", svctest.NameEnv: "svctest", "GORACE": "atexit_sleep_ms=0"},
		HealthPath:       "/health",
		Identity:         "svctest",
		HealthIntervalMs: 200,
		StartTimeoutMs:   10_000,
		StopTimeoutMs:    2000,
	}
	if mutate != nil {
		mutate(&c)
	}
	return c
}

// withServices returns testFile with services added.
func withServices(t *testing.T, svcs map[string]config.ServiceConfig) *config.File {
	f := testFile(t, "")
	f.Services = svcs
	return f
}

func (g *gwEnv) service(name string) *services.Handle {
	g.t.Helper()
	h, ok := g.gw.Services().Get(name)
	if !ok {
		g.t.Fatalf("no service %s", name)
	}
	return h
}

// pidAlive reports whether pid exists and is not a zombie.
func pidAlive(pid int) bool {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	b := string(raw)
	i := strings.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// sseReader reads events from a streaming response.
type sseReader struct {
	br *bufio.Reader
}

// next returns the next (event, data) pair.
func (s *sseReader) next() (string, string, error) {
	var name, data string
	for {
		line, err := s.br.ReadString('\n')
		if err != nil {
			return "", "", err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if data != "" || name != "" {
				return name, data, nil
			}
		case strings.HasPrefix(line, "event: "):
			name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			data = line[len("data: "):]
		}
	}
}
