package mockprovider

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestStartProcess re-executes this test binary as the mock (RunIfChild in
// TestMain), talks to it and stops it with SIGTERM.
func TestStartProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := StartProcess(ctx, "", "--quiet", "--behavior", `{"text":"from the child","chunk_count":2}`)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = p.Stop()
		}
	}()
	if !strings.HasPrefix(p.Addr, "127.0.0.1:") {
		t.Errorf("addr = %q", p.Addr)
	}
	e := &testEnv{base: "http://" + p.Addr, hc: newEnvClient()}
	defer e.hc.CloseIdleConnections()
	e.admin = &Client{BaseURL: e.base}
	h, err := e.admin.Health()
	if err != nil {
		t.Fatalf("health: %v", err)
	}
	if h.PID != p.Cmd.Process.Pid || h.Instance == InstanceID() || h.Service != ServiceName {
		t.Errorf("health = %+v, want the child's pid %d and a different instance", h, p.Cmd.Process.Pid)
	}
	if r := e.mustPost(t, chatPath, `{"model":"m"}`); r.status != 200 || !strings.Contains(string(r.body), "from the child") {
		t.Errorf("child answered %d %s", r.status, r.body)
	}
	e.hc.CloseIdleConnections()
	stopped = true
	if err := p.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("second stop: %v", err)
	}
	if code := p.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d", code)
	}
}

func TestStartProcessFailsFast(t *testing.T) {
	_, err := StartProcess(context.Background(), "", "--behavior", `{"fail":{"mode":"nope"}}`)
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") || !strings.Contains(err.Error(), "fail.mode") {
		t.Errorf("err = %v, want an early exit quoting the child's stderr", err)
	}
}

func TestMainFlags(t *testing.T) {
	tests := []struct {
		args    []string
		code    int
		wantErr string
	}{
		{[]string{"--behavior", `{"latency":1}`}, 2, `unknown field "latency"`},
		{[]string{"--nope"}, 2, "flag provided but not defined"},
		{[]string{"extra"}, 2, "unexpected arguments"},
		{[]string{"--listen", "256.0.0.1:0"}, 1, "listen on 256.0.0.1:0"},
		{[]string{"-h"}, 0, "-listen"},
	}
	for _, tc := range tests {
		var out, errOut bytes.Buffer
		if code := run(tc.args, &out, &errOut); code != tc.code || !strings.Contains(errOut.String(), tc.wantErr) {
			t.Errorf("%v: code %d stderr %q, want %d containing %q", tc.args, code, errOut.String(), tc.code, tc.wantErr)
		}
		if out.Len() != 0 {
			t.Errorf("%v: stdout %q, want nothing", tc.args, out.String())
		}
	}
}
