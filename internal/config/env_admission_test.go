package config

import (
	"os"
	"strings"
	"testing"
)

func TestAdmissionEnvDefaults(t *testing.T) {
	e := loadEnv(t, map[string]string{})
	a, p := e.Admission, e.Pressure
	if a.LargeBodyBytes != 262144 || a.QueueWait != 2000 || a.MaxQueuedBytes != 4194304 || a.HeavyMessages != 200 ||
		a.HeavyTools != 64 || a.HeavyTokens != 32000 || a.HardMaxMessages != 0 || a.HeapShedRatio != 0.75 {
		t.Fatalf("defaults %+v", a)
	}
	if _, ok := a.MaxInflightBytes.Get(); ok {
		t.Fatal("the budget override is unset by default")
	}
	if _, ok := a.CountCap(); ok || a.Headroom() != 0 || a.SelfLoopKey() != "" {
		t.Fatalf("no count cap, no headroom and no self-loop key by default: %+v", a)
	}
	if p.PressureHighRatio != 0.85 || p.PressureCriticalRatio != 0.92 || p.PressureRecoveryRatio != 0.75 || p.PSIHigh != 30 ||
		p.PSICritical != 60 || p.PSIRecovery != 15 || p.PSISource != "auto" || p.SustainHigh != 2 || p.SustainCritical != 2 || p.SustainRecovery != 1 {
		t.Fatalf("pressure defaults %+v", p)
	}
}

func TestAdmissionEnvValues(t *testing.T) {
	e := loadEnv(t, map[string]string{
		"OMNIROUTE_CHAT_MAX_INFLIGHT_BYTES": "256MiB", "OMNIROUTE_CHAT_MAX_HEAVY_IN_FLIGHT": "4",
		"OMNIROUTE_CHAT_ADMISSION_QUEUE_MS": "0", "ROUTER_API_KEY": "router-key", "OMNIROUTE_PRESSURE_PSI_SOURCE": "OFF",
	})
	a := e.Admission
	if n, ok := a.MaxInflightBytes.Get(); !ok || n != 256<<20 {
		t.Fatalf("override %d %v", n, ok)
	}
	if n, ok := a.CountCap(); !ok || n != 4 || a.Headroom() != 4 {
		t.Fatalf("count cap %d %v headroom %d: the headroom defaults to the cap", n, ok, a.Headroom())
	}
	if a.QueueWait != 0 || a.SelfLoopKey() != "router-key" || e.Pressure.PSISource != "off" {
		t.Fatalf("%+v %+v", a, e.Pressure)
	}
	e = loadEnv(t, map[string]string{"OMNIROUTE_CHAT_MAX_HEAVY_IN_FLIGHT": "2", "OMNIROUTE_CHAT_ADMISSION_HEALTHY_HEADROOM": "0",
		"OMNIROUTE_API_KEY": "main-key", "ROUTER_API_KEY": "router-key"})
	if e.Admission.Headroom() != 0 || e.Admission.SelfLoopKey() != "main-key" {
		t.Fatalf("headroom %d key %q", e.Admission.Headroom(), e.Admission.SelfLoopKey())
	}
}

func TestAdmissionEnvErrors(t *testing.T) {
	checkEnvErrors(t, []envErrorCase{
		// OmniRoute read "0" and garbage as 1; here they stop start-up.
		{map[string]string{"OMNIROUTE_CHAT_MAX_HEAVY_IN_FLIGHT": "0"}, []string{`OMNIROUTE_CHAT_MAX_HEAVY_IN_FLIGHT="0"`, "positive integer"}},
		{map[string]string{"OMNIROUTE_CHAT_MAX_HEAVY_IN_FLIGHT": "many"}, []string{`OMNIROUTE_CHAT_MAX_HEAVY_IN_FLIGHT="many"`, "positive integer"}},
		{map[string]string{"OMNIROUTE_CHAT_MAX_HEAVY_IN_FLIGHT": "-3"}, []string{`OMNIROUTE_CHAT_MAX_HEAVY_IN_FLIGHT="-3"`}},
		{map[string]string{"OMNIROUTE_CHAT_ADMISSION_QUEUE_MS": "2000ms"}, []string{`OMNIROUTE_CHAT_ADMISSION_QUEUE_MS="2000ms"`, "whole milliseconds"}},
		{map[string]string{"OMNIROUTE_CHAT_MAX_INFLIGHT_BYTES": "0"}, []string{"OMNIROUTE_CHAT_MAX_INFLIGHT_BYTES=0", "positive byte count"}},
		{map[string]string{"OMNIROUTE_CHAT_MAX_INFLIGHT_BYTES": "1e8"}, []string{`OMNIROUTE_CHAT_MAX_INFLIGHT_BYTES="1e8"`, "byte count"}},
		{map[string]string{"OMNIROUTE_CHAT_ADMISSION_MAX_QUEUED_BYTES": "0"}, []string{"OMNIROUTE_CHAT_ADMISSION_MAX_QUEUED_BYTES must be at least 1"}},
		{map[string]string{"OMNIROUTE_CHAT_LARGE_BODY_BYTES": "0"}, []string{"OMNIROUTE_CHAT_LARGE_BODY_BYTES must be at least 1"}},
		{map[string]string{"OMNIROUTE_CHAT_HEAVY_MESSAGE_COUNT": "0"}, []string{`OMNIROUTE_CHAT_HEAVY_MESSAGE_COUNT="0"`}},
		{map[string]string{"OMNIROUTE_CHAT_HARD_MAX_MESSAGES": "-1"}, []string{`OMNIROUTE_CHAT_HARD_MAX_MESSAGES="-1"`, "non-negative"}},
		{map[string]string{"OMNIROUTE_CHAT_ADMISSION_HEALTHY_HEADROOM": "x"}, []string{`OMNIROUTE_CHAT_ADMISSION_HEALTHY_HEADROOM="x"`}},
		{map[string]string{"OMNIROUTE_CHAT_ADMISSION_HEAP_SHED_RATIO": "0"}, []string{"OMNIROUTE_CHAT_ADMISSION_HEAP_SHED_RATIO must be greater than 0"}},
		{map[string]string{"OMNIROUTE_CHAT_ADMISSION_HEAP_SHED_RATIO": "1.5"}, []string{`OMNIROUTE_CHAT_ADMISSION_HEAP_SHED_RATIO="1.5"`, "between 0 and 1"}},
		{map[string]string{"OMNIROUTE_PRESSURE_HIGH_RATIO": "0.95"}, []string{"OMNIROUTE_PRESSURE_RECOVERY_RATIO (0.75) < OMNIROUTE_PRESSURE_HIGH_RATIO (0.95) < OMNIROUTE_PRESSURE_CRITICAL_RATIO (0.92)"}},
		{map[string]string{"OMNIROUTE_PRESSURE_PSI_RECOVERY": "40"}, []string{"OMNIROUTE_PRESSURE_PSI_RECOVERY (40)"}},
		{map[string]string{"OMNIROUTE_PRESSURE_PSI_HIGH": "101"}, []string{`OMNIROUTE_PRESSURE_PSI_HIGH="101"`, "percentage"}},
		{map[string]string{"OMNIROUTE_PRESSURE_PSI_SOURCE": "proc"}, []string{`OMNIROUTE_PRESSURE_PSI_SOURCE="proc"`, "auto"}},
		{map[string]string{"OMNIROUTE_PRESSURE_SUSTAIN_RECOVERY": "0"}, []string{`OMNIROUTE_PRESSURE_SUSTAIN_RECOVERY="0"`}},
		{map[string]string{"OMNIROUTE_PRESSURE_SUSTAIN_HIGH": "20000"}, []string{"OMNIROUTE_PRESSURE_SUSTAIN_HIGH=20000 is too large"}},
	})
}

// TestEveryEnvVarDocumented keeps the README's table complete: every
// variable Env reads appears there with its default.
func TestEveryEnvVarDocumented(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, f := range EnvFields() {
		row := "| `" + f.Var + "` |"
		i := strings.Index(readme, row)
		if i < 0 {
			t.Errorf("README.md has no table row for %s", f.Var)
			continue
		}
		if f.Default == "" {
			continue
		}
		line := readme[i:]
		if j := strings.IndexByte(line, '\n'); j >= 0 {
			line = line[:j]
		}
		if !strings.Contains(line, "`"+f.Default+"`") {
			t.Errorf("README.md row for %s does not give its default `%s`: %s", f.Var, f.Default, line)
		}
	}
}
