package config

import "testing"

// FuzzAdmissionEnv feeds arbitrary values to the admission and pressure
// variables: LoadEnv never panics, and whatever it accepts is in range.
func FuzzAdmissionEnv(f *testing.F) {
	for _, s := range []string{"0", "1", "0.75", "4MiB", "auto", "-1", "1e3", "NaN", "+Inf", " 12 ", "2000ms", ""} {
		f.Add(s, s, s, s)
	}
	f.Fuzz(func(t *testing.T, ratio, count, size, source string) {
		e, err := LoadEnv(map[string]string{
			"OMNIROUTE_CHAT_ADMISSION_HEAP_SHED_RATIO": ratio, "OMNIROUTE_PRESSURE_PSI_HIGH": ratio,
			"OMNIROUTE_CHAT_MAX_HEAVY_IN_FLIGHT": count, "OMNIROUTE_CHAT_HARD_MAX_MESSAGES": count, "OMNIROUTE_CHAT_ADMISSION_HEALTHY_HEADROOM": count,
			"OMNIROUTE_CHAT_MAX_INFLIGHT_BYTES": size, "OMNIROUTE_PRESSURE_PSI_SOURCE": source,
		})
		if err != nil {
			return
		}
		a, p := e.Admission, e.Pressure
		if !(a.HeapShedRatio > 0 && a.HeapShedRatio <= 1) || !(p.PSIHigh >= 0 && p.PSIHigh <= 100) {
			t.Fatalf("ratio %v / psi %v accepted", a.HeapShedRatio, p.PSIHigh)
		}
		if n, ok := a.CountCap(); ok && n < 1 || a.Headroom() < 0 || a.HardMaxMessages < 0 {
			t.Fatalf("count %d accepted", n)
		}
		if n, ok := a.MaxInflightBytes.Get(); ok && n < 1 {
			t.Fatalf("budget %d accepted", n)
		}
		switch p.PSISource {
		case "auto", "cgroup", "host", "off":
		default:
			t.Fatalf("PSI source %q accepted", p.PSISource)
		}
	})
}
