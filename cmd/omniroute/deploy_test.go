package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// readKV reads KEY=VALUE lines (comments and blank lines skipped), the
// format of a systemd EnvironmentFile and of a unit's directives.
func readKV(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: line %q is not KEY=VALUE", path, line)
		}
		out[k] = append(out[k], v)
	}
	return out
}

// TestDeploySampleStarts runs the gateway the way deploy/omniroute.service
// does: the sample config file and the sample environment file, with the
// secrets filled in and the listen address and data directory moved for
// the test. It must start, answer /healthz and be ready.
func TestDeploySampleStarts(t *testing.T) {
	env := baseEnv(t)
	for k, v := range readKV(t, "../../deploy/omniroute.env") {
		env[k] = v[len(v)-1]
	}
	for k, v := range env {
		if v == "" && strings.HasSuffix(k, "_KEY") {
			env[k] = "sample-secret-" + strings.ToLower(k)
		}
	}
	env["OMNIROUTE_LISTEN"] = "127.0.0.1:0"
	env["OMNIROUTE_CONFIG"] = "../../deploy/omniroute.json"
	var out, errOut syncBuffer
	sig := make(chan os.Signal, 1)
	code := make(chan int, 1)
	go func() { code <- run(nil, env, &out, &errOut, sig) }()
	addr := waitListening(t, &out, code)
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := hc.Get("http://" + addr + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d %s", p, resp.StatusCode, b)
		}
	}
	hc.CloseIdleConnections()
	sig <- syscall.SIGTERM
	if c := <-code; c != 0 {
		t.Fatalf("exit %d, stderr %s", c, errOut.String())
	}
}

// TestDeployUnitHardened checks the systemd unit: it runs the installed
// binary on the sample files, writes only its state directory (the data
// directory), waits longer than the drain before killing, and keeps its
// sandbox options.
func TestDeployUnitHardened(t *testing.T) {
	u := readKV(t, "../../deploy/omniroute.service")
	env := readKV(t, "../../deploy/omniroute.env")
	one := func(k string) string {
		if len(u[k]) == 0 {
			t.Fatalf("the unit has no %s=", k)
		}
		return u[k][len(u[k])-1]
	}
	if one("ExecStart") != "/usr/local/bin/omniroute serve" || one("EnvironmentFile") != "/etc/omniroute/omniroute.env" {
		t.Fatalf("ExecStart %q EnvironmentFile %q", one("ExecStart"), one("EnvironmentFile"))
	}
	if one("ExecReload") != "/bin/kill -HUP $MAINPID" {
		t.Fatalf("ExecReload %q: systemctl reload must send SIGHUP (the config reload)", one("ExecReload"))
	}
	vars := map[string]string{}
	for _, e := range u["Environment"] {
		k, v, _ := strings.Cut(e, "=")
		vars[k] = v
	}
	if vars["OMNIROUTE_DATA_DIR"] != "/var/lib/"+one("StateDirectory") {
		t.Errorf("OMNIROUTE_DATA_DIR %q is not the StateDirectory %q: the gateway could not write it under ProtectSystem=strict", vars["OMNIROUTE_DATA_DIR"], one("StateDirectory"))
	}
	if !strings.HasPrefix(vars["OMNIROUTE_CONFIG"], "/etc/"+one("ConfigurationDirectory")+"/") {
		t.Errorf("OMNIROUTE_CONFIG %q is outside the ConfigurationDirectory", vars["OMNIROUTE_CONFIG"])
	}
	drainMs := 30000
	if v := env["OMNIROUTE_SHUTDOWN_TIMEOUT_MS"]; len(v) > 0 {
		drainMs, _ = strconv.Atoi(v[0])
	}
	if stop, err := strconv.Atoi(one("TimeoutStopSec")); err != nil || stop*1000 <= drainMs {
		t.Errorf("TimeoutStopSec=%s must exceed the drain (%d ms)", one("TimeoutStopSec"), drainMs)
	}
	for k, want := range map[string]string{
		"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
		"PrivateDevices": "yes", "DynamicUser": "yes", "CapabilityBoundingSet": "", "RestrictNamespaces": "yes",
		"ProtectKernelTunables": "yes", "ProtectKernelModules": "yes", "ProtectControlGroups": "yes",
		"RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX", "LockPersonality": "yes", "MemoryDenyWriteExecute": "yes",
		"KillSignal": "SIGTERM", "UMask": "0077",
	} {
		if got := one(k); got != want {
			t.Errorf("%s=%q, want %q", k, got, want)
		}
	}
}
