package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSIGHUPReloadsConfig runs the real binary as a child process on a
// config file: SIGHUP puts a rewritten file (a new model and an alias) in
// force without a restart (same pid, the version on /api/monitoring/health
// moves to 2), and a broken file sent by SIGHUP is logged with its errors
// while the running config keeps serving.
func TestSIGHUPReloadsConfig(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "internal", "config", "default.json"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "omniroute.json")
	write := func(mut func(models, root map[string]any)) {
		var f map[string]any
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatal(err)
		}
		mut(f["models"].(map[string]any), f)
		out, _ := json.Marshal(f)
		if err := os.WriteFile(path, out, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(func(map[string]any, map[string]any) {})

	cmd, addr, stderr := startServe(t, "OMNIROUTE_CONFIG="+path)
	defer cmd.Process.Kill() //nolint:errcheck
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	defer hc.CloseIdleConnections()
	chat := func(model string) int {
		resp, err := hc.Post("http://"+addr+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body) //nolint:errcheck
		resp.Body.Close()
		return resp.StatusCode
	}
	version := func() float64 {
		resp, err := hc.Get("http://" + addr + "/api/monitoring/health")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var h struct {
			Server struct {
				Config struct {
					Version float64 `json:"version"`
				} `json:"config"`
			} `json:"server"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
			t.Fatal(err)
		}
		return h.Server.Config.Version
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; stderr %s", what, stderr.String())
			}
		}
	}
	waitUntil("the demo model", func() bool { return chat("demo") == 200 })
	if chat("demo-two") != 404 || version() != 1 {
		t.Fatal("before SIGHUP: demo-two must be unknown and the version 1")
	}

	write(func(models, root map[string]any) {
		models["demo-two"] = models["demo"]
		root["aliases"] = map[string]any{"demo-alias": "demo-two"}
	})
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil("version 2", func() bool { return version() == 2 })
	if chat("demo-two") != 200 || chat("demo-alias") != 200 || chat("demo") != 200 {
		t.Fatal("after SIGHUP the new model and alias must answer beside the old one")
	}

	write(func(_, root map[string]any) { root["aliases"] = map[string]any{"demo-alias": "nope"} })
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil("the refusal in the log", func() bool {
		return strings.Contains(stderr.String(), "config reload refused") && strings.Contains(stderr.String(), `aliases.demo-alias: \"nope\" is not a configured model`)
	})
	if version() != 2 || chat("demo-alias") != 200 {
		t.Fatal("a refused reload changed the running config")
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v; stderr %s", err, stderr.String())
	}
}
