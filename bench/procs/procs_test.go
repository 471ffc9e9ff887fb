package procs

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func shell(t *testing.T) string {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatalf("these tests need a POSIX shell: %v", err)
	}
	return sh
}

func TestStartReadsReadyLineAndExtras(t *testing.T) {
	t.Setenv("OMNIROUTE_X", "leak")
	t.Setenv("ADAPTIVE_ADMISSION_MODE", "enforce")
	t.Setenv("GOMAXPROCS", "1")
	log := filepath.Join(t.TempDir(), "p.log")
	p, err := Start(context.Background(), Spec{
		Name: "fake", Exe: shell(t), Log: log, Ready: "fake listening on http://",
		Args: []string{"-c", `echo "env=$OMNIROUTE_X$ADAPTIVE_ADMISSION_MODE$GOMAXPROCS:$KEEP" >&2; echo "prof listening on http://127.0.0.1:7"; echo "fake listening on http://127.0.0.1:9"; exec sleep 30`},
		Env:  []string{"KEEP=yes"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.Addr != "127.0.0.1:9" || p.Extra["prof"] != "127.0.0.1:7" || p.Pid <= 0 || !p.Alive() {
		t.Fatalf("%+v", p)
	}
	// SIGTERM kills sleep: an unclean exit is reported.
	if err := p.Stop(); err == nil {
		t.Fatal("a process killed by SIGTERM reported a clean stop")
	}
	if p.Alive() {
		t.Fatal("still alive after Stop")
	}
	b, _ := os.ReadFile(log)
	if !strings.Contains(string(b), "env=:yes") || !strings.Contains(string(b), "fake listening") {
		t.Fatalf("log %q: the environment was not cleaned or the output not kept", b)
	}
}

func TestStartFailures(t *testing.T) {
	t.Setenv("OMNIROUTE_X", "leak")
	t.Setenv("ADAPTIVE_ADMISSION_MODE", "enforce")
	t.Setenv("GOMAXPROCS", "1")
	for _, kv := range CleanEnv() {
		if strings.HasPrefix(kv, "OMNIROUTE_") || strings.HasPrefix(kv, "ADAPTIVE_") || strings.HasPrefix(kv, "GOMAXPROCS=") {
			t.Fatalf("CleanEnv kept %s", kv)
		}
	}
	_, err := Start(context.Background(), Spec{Name: "dies", Exe: shell(t), Ready: "x", Args: []string{"-c", "echo boom >&2; exit 3"}})
	if err == nil || !strings.Contains(err.Error(), "boom") || !strings.Contains(err.Error(), "exited before it was ready") {
		t.Fatalf("got %v", err)
	}
	_, err = Start(context.Background(), Spec{Name: "mute", Exe: shell(t), Ready: "x", StartTimeout: 200 * time.Millisecond, Args: []string{"-c", "exec sleep 30"}})
	if err == nil || !strings.Contains(err.Error(), "printed no line") {
		t.Fatalf("got %v", err)
	}
	_, err = Start(context.Background(), Spec{Name: "missing", Exe: filepath.Join(t.TempDir(), "nope"), Ready: "x"})
	if err == nil {
		t.Fatal("a missing executable started")
	}
}

func TestModuleRoot(t *testing.T) {
	root, err := ModuleRoot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "cmd", "omniroute")); err != nil {
		t.Fatalf("module root %s has no cmd/omniroute: %v", root, err)
	}
}
