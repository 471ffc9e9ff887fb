package main

import (
	"context"
	"strings"
	"testing"

	"github.com/omniroute/gateway/bench"
	"github.com/omniroute/gateway/internal/testutil"
)

func TestMain(m *testing.M) {
	// Every issue's scenario is wired in, so the "not available in this
	// build" path needs a scenario of its own.
	bench.Register(bench.Scenario{Name: "test-unavailable", Order: 99, Unavailable: "registered by main_test"})
	testutil.VerifyTestMain(m)
}

func TestFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		out  string // in stdout or stderr
	}{
		{"list", []string{"--list"}, 0, "largebody (available)"},
		{"list unavailable", []string{"--list"}, 0, "test-unavailable (not available in this build: registered by main_test"},
		{"help", []string{"-h"}, 0, "-allow-noisy"},
		{"bad rate", []string{"--rates", "200,0"}, 2, "not a positive number"},
		{"unknown flag", []string{"--nope"}, 2, "flag provided but not defined"},
		{"unknown scenario", []string{"--out", t.TempDir(), "nosuch"}, 2, `unknown scenario "nosuch"`},
		{"bad settings", []string{"--rounds", "0", "--out", t.TempDir()}, 2, "--rounds 0"},
		{"only unavailable", []string{"--out", t.TempDir(), "test-unavailable"}, 2, "unavailable in this build"},
		{"bad largebody", []string{"--largebody-uploads", "0", "--out", t.TempDir()}, 2, "--largebody-uploads"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb strings.Builder
			code := run(context.Background(), tc.args, &out, &errb)
			if code != tc.code || !strings.Contains(out.String()+errb.String(), tc.out) {
				t.Fatalf("code %d, stdout %q, stderr %q; want %d and %q", code, out.String(), errb.String(), tc.code, tc.out)
			}
		})
	}
}

func TestFloatList(t *testing.T) {
	var l floatList
	if err := l.Set("200, 1000"); err != nil || len(l) != 2 || l.String() != "200,1000" {
		t.Fatalf("%v %v", l, err)
	}
	if err := l.Set("x"); err == nil {
		t.Fatal("accepted x")
	}
}
