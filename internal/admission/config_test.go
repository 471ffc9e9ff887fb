package admission

import (
	"strings"
	"testing"
)

func TestDefaultConfigIsValid(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Mode != ModeShadow || c.MinLimit != 8 || c.InitialLimit != 64 || c.MaxLimit != 1000 ||
		c.MaxQueueCount != 128 || c.MaxQueueCost != 2000 || c.DefaultMaxWaitMs != 5000 || c.WindowMs != 1000 {
		t.Fatalf("runtime defaults differ from OmniRoute's: %+v", c)
	}
}

func TestConfigValidationMessages(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want []string
	}{
		{"zero min", func(c *Config) { c.MinLimit = 0 }, []string{"minLimit must be a positive safe integer"}},
		{"huge max", func(c *Config) { c.MaxLimit = MaxCostOrLimit + 1 }, []string{"maxLimit must be <= 104249991"}},
		{"unsafe", func(c *Config) { c.MaxQueueCount = MaxSafeInteger + 1 }, []string{"maxQueueCount must be a positive safe integer"}},
		{"min over max", func(c *Config) { c.MinLimit, c.MaxLimit = 100, 10 }, []string{"minLimit must be <= maxLimit"}},
		{"window", func(c *Config) { c.WindowMs = MaxWindowMs + 1 }, []string{"windowMs must be <= 86400000"}},
		{"wait zero", func(c *Config) { c.DefaultMaxWaitMs = 0 }, []string{"defaultMaxWaitMs must be a positive safe integer"}},
		{"cost quantum", func(c *Config) { c.Cost.TokensPerUnit = 0 }, []string{"cost.tokensPerUnit must be a positive safe integer"}},
		{"mode", func(c *Config) { c.Mode = 7 }, []string{"mode must be off|shadow|enforce"}},
		{"decrease", func(c *Config) { c.DecreaseFactor = 1 }, []string{"decreaseFactor must be in (0, 1)"}},
		{"critical above decrease", func(c *Config) { c.CriticalDecreaseFactor = 0.9 }, []string{"criticalDecreaseFactor must be <= decreaseFactor"}},
		{"alpha", func(c *Config) { c.ShortLatencyAlpha = 1.5 }, []string{"shortLatencyAlpha must be in (0, 1]"}},
		{"alphas", func(c *Config) { c.ShortLatencyAlpha, c.LongLatencyAlpha = 0.1, 0.5 }, []string{"shortLatencyAlpha must be > longLatencyAlpha"}},
		{"thresholds", func(c *Config) { c.LowUtilizationThreshold = 0.8 }, []string{"lowUtilizationThreshold must be < highUtilizationThreshold"}},
		{"gradient", func(c *Config) { c.LatencyGradientThreshold = 0 }, []string{"latencyGradientThreshold must be in (0, 1]"}},
		{"shares", func(c *Config) { c.ClassShares = [NumClasses]int64{80, 30} }, []string{"interactiveShare + batchShare must be <= 100"}},
		{"guard", func(c *Config) { c.DriftGuardFactor = 0.5 }, []string{"driftGuardFactor must be 0 (off) or between 1 and 1000"}},
		{"several at once, in order", func(c *Config) { c.MinLimit, c.DecreaseFactor = -1, 0 },
			[]string{"minLimit must be a positive safe integer", "decreaseFactor must be in (0, 1)", "criticalDecreaseFactor must be <= decreaseFactor"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("accepted")
			}
			errs := err.(Errors)
			if len(errs) != len(tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(errs[i].Msg, w) {
					t.Fatalf("error %d = %q, want %q", i, errs[i].Msg, w)
				}
			}
		})
	}
}

func TestInitialLimitIsClampedNotRejected(t *testing.T) {
	c := DefaultConfig()
	c.InitialLimit = 5000
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.ClampedInitial() != 1000 {
		t.Fatalf("clamped initial = %d", c.ClampedInitial())
	}
}

func TestParseModeAndClass(t *testing.T) {
	for in, want := range map[string]Mode{"off": ModeOff, " Shadow ": ModeShadow, "ENFORCE": ModeEnforce} {
		if m, err := ParseMode(in); err != nil || m != want {
			t.Fatalf("ParseMode(%q) = %v, %v", in, m, err)
		}
	}
	if _, err := ParseMode("on"); err == nil || err.Error() != "mode must be off|shadow|enforce" {
		t.Fatalf("ParseMode(on) error %v", err)
	}
	for in, want := range map[string]Class{"interactive": Interactive, " BATCH\t": Batch} {
		if c, ok := ParseClass(in); !ok || c != want {
			t.Fatalf("ParseClass(%q) = %v, %v", in, c, ok)
		}
	}
	for _, in := range []string{"", "high", "interactive2", "batc"} {
		if _, ok := ParseClass(in); ok {
			t.Fatalf("ParseClass(%q) accepted", in)
		}
	}
}

func FuzzParseClass(f *testing.F) {
	for _, s := range []string{"interactive", "batch", " Batch ", "", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, ok := ParseClass(s)
		if !ok {
			return
		}
		if c >= NumClasses || !strings.EqualFold(strings.Trim(s, " \t"), c.String()) {
			t.Fatalf("ParseClass(%q) = %v", s, c)
		}
	})
}
