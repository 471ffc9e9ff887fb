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
	if c.Mode != ModeEnforce || !c.VirtualLanes || c.MinLimit != 1 || c.InitialLimit != 16 || c.MaxLimit != 4096 || c.GlobalLimit != 65536 ||
		c.MaxQueueCount != 512 || c.MaxQueueCost != 1024 || c.DefaultMaxWaitMs != 5000 || c.WindowMs != 1000 || c.QueueTargetMs != 0 {
		t.Fatalf("runtime defaults differ from the documented ones: %+v", c)
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
		{"cost quantum", func(c *Config) { c.Cost.TokensPerUnit = -1 }, []string{"cost.tokensPerUnit must be 0 (off) or a positive safe integer"}},
		{"mode", func(c *Config) { c.Mode = 7 }, []string{"mode must be off|shadow|enforce"}},
		{"global", func(c *Config) { c.GlobalLimit = -1 }, []string{"globalLimit must be 0 (none) or a positive integer"}},
		{"queue target", func(c *Config) { c.QueueTargetMs = -1 }, []string{"queueTargetMs must be 0 (automatic)"}},
		{"shares", func(c *Config) { c.ClassShares = [NumClasses]int64{80, 30} }, []string{"interactiveShare + batchShare must be <= 100"}},
		{"several at once, in order", func(c *Config) { c.MinLimit, c.GlobalLimit, c.MaxLanes = -1, -1, 0 },
			[]string{"minLimit must be a positive safe integer", "globalLimit must be 0", "maxLanes must be between 1 and 1000000"}},
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
	if c.ClampedInitial() != 4096 {
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
