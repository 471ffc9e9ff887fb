package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func TestVersionText(t *testing.T) {
	stamped := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/omniroute/gateway", Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}}}
	cases := []struct {
		name   string
		bi     *debug.BuildInfo
		ok     bool
		ldflag string
		want   []string
	}{
		{"dev build in a dirty checkout", stamped, true, "dev", []string{"omniroute dev\n", "module: github.com/omniroute/gateway (devel)\n", "revision: 0123abcd (modified)\n", "commit time: 2026-12-01T10:00:00Z\n", "go: go1.26.0\n"}},
		{"ldflags version wins", stamped, true, "v1.2.3", []string{"omniroute v1.2.3\n", "revision: 0123abcd (modified)\n"}},
		{"go install of a tagged module", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/omniroute/gateway", Version: "v0.4.0"}}, true, "dev",
			[]string{"omniroute v0.4.0\n", "module: github.com/omniroute/gateway v0.4.0\n", "revision: unknown"}},
		{"clean checkout", &debug.BuildInfo{Main: debug.Module{Path: "m"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "ff"}, {Key: "vcs.modified", Value: "false"}}}, true, "dev",
			[]string{"revision: ff\n"}},
		{"no build info", nil, false, "dev", []string{"omniroute dev\n", "build info: unavailable"}},
	}
	for _, tc := range cases {
		got := versionText(tc.bi, tc.ok, tc.ldflag)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", tc.name, got, w)
			}
		}
		if tc.name == "clean checkout" && strings.Contains(got, "modified") {
			t.Errorf("clean checkout reported modified: %q", got)
		}
	}
}

// TestVersionCommandShowsRevision builds the real binary the way a user
// does (go build in this checkout, VCS stamping on) and checks that `omniroute version`
// prints the checkout's HEAD revision, or says it is unknown when the
// source is not a git checkout.
func TestVersionCommandShowsRevision(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "omniroute")
	// -buildvcs=auto is go build's default; said explicitly because GOFLAGS
	// may turn stamping off.
	build := exec.CommandContext(ctx, "go", "build", "-buildvcs=auto", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		t.Fatalf("omniroute version: %v", err)
	}
	if !strings.HasPrefix(string(out), "omniroute ") || !strings.Contains(string(out), "module: github.com/omniroute/gateway") {
		t.Fatalf("version output %q", out)
	}
	// Go stamps the revision when the module root holds a .git directory
	// (a clone); a git worktree (.git is a file) or an unpacked tarball is
	// not stamped, and then the command must say the revision is unknown.
	fi, statErr := os.Stat("../../.git")
	if statErr != nil || !fi.IsDir() {
		if !strings.Contains(string(out), "revision: unknown") {
			t.Fatalf("without a .git directory the revision must be unknown: %q", out)
		}
		return
	}
	head, err := exec.CommandContext(ctx, "git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD in a git checkout: %v", err)
	}
	if want := "revision: " + strings.TrimSpace(string(head)); !strings.Contains(string(out), want) {
		t.Fatalf("version output %q lacks %q", out, want)
	}
}
