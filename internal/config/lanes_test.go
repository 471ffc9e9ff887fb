package config

import (
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/admission"
)

func TestLanesEnvDefaultsAreTheAdmissionDefaults(t *testing.T) {
	e := loadEnv(t, map[string]string{})
	c := e.Lanes.Config()
	want := admission.DefaultConfig()
	if c != want {
		t.Fatalf("config from default env %+v\nwant %+v", c, want)
	}
	if !e.Lanes.VirtualLanes || admission.Mode(e.Lanes.AdmissionMode) != admission.ModeEnforce || admission.Class(e.Lanes.DefaultClass) != admission.Interactive {
		t.Fatalf("by default: enforce, lanes on, interactive; got %+v", e.Lanes)
	}
}

func TestLanesEnvValues(t *testing.T) {
	e := loadEnv(t, map[string]string{
		"ADAPTIVE_ADMISSION_MODE": "enforce", "ADAPTIVE_ADMISSION_MIN_LIMIT": "2", "ADAPTIVE_ADMISSION_MAX_LIMIT": "50",
		"ADAPTIVE_ADMISSION_MAX_WAIT_MS": "250", "OMNIROUTE_CHAT_VIRTUAL_LANES": "1",
		"OMNIROUTE_PRIORITY_DEFAULT_CLASS": "Batch", "OMNIROUTE_PRIORITY_BATCH_SHARE": "40", "OMNIROUTE_PRIORITY_INTERACTIVE_SHARE": "60",
		"ADAPTIVE_ADMISSION_GLOBAL_LIMIT": "0", "ADAPTIVE_ADMISSION_QUEUE_TARGET_MS": "40",
	})
	c := e.Lanes.Config()
	if c.Mode != admission.ModeEnforce || c.MinLimit != 2 || c.MaxLimit != 50 || c.DefaultMaxWaitMs != 250 || !c.VirtualLanes ||
		c.ClassShares != [admission.NumClasses]int64{60, 40} || c.GlobalLimit != 0 || c.QueueTargetMs != 40 || admission.Class(e.Lanes.DefaultClass) != admission.Batch {
		t.Fatalf("config %+v", c)
	}
}

func TestLanesEnvErrorsNameTheVariable(t *testing.T) {
	checkEnvErrors(t, []envErrorCase{
		{map[string]string{"ADAPTIVE_ADMISSION_MODE": "on"}, []string{`cannot parse ADAPTIVE_ADMISSION_MODE="on"`, "off, shadow or enforce"}},
		{map[string]string{"ADAPTIVE_ADMISSION_MIN_LIMIT": "0"}, []string{`ADAPTIVE_ADMISSION_MIN_LIMIT="0"`, "positive safe integer"}},
		{map[string]string{"ADAPTIVE_ADMISSION_WINDOW_MS": "1e3"}, []string{`ADAPTIVE_ADMISSION_WINDOW_MS="1e3"`, "positive safe integer"}},
		{map[string]string{"ADAPTIVE_ADMISSION_MAX_LIMIT": "9007199254740992"}, []string{"ADAPTIVE_ADMISSION_MAX_LIMIT", "positive safe integer"}},
		{map[string]string{"ADAPTIVE_ADMISSION_MIN_LIMIT": "500", "ADAPTIVE_ADMISSION_MAX_LIMIT": "100"}, []string{"ADAPTIVE_ADMISSION_MIN_LIMIT=500: minLimit must be <= maxLimit"}},
		{map[string]string{"ADAPTIVE_ADMISSION_MAX_LIMIT": "200000000"}, []string{"ADAPTIVE_ADMISSION_MAX_LIMIT=200000000: maxLimit must be <= 104249991"}},
		{map[string]string{"ADAPTIVE_ADMISSION_MAX_WAIT_MS": "90000000"}, []string{"ADAPTIVE_ADMISSION_MAX_WAIT_MS=90000000: defaultMaxWaitMs must be <= 86400000"}},
		{map[string]string{"OMNIROUTE_CHAT_VIRTUAL_LANES": "yes"}, []string{`OMNIROUTE_CHAT_VIRTUAL_LANES="yes"`, "true, false, 1 or 0"}},
		{map[string]string{"OMNIROUTE_PRIORITY_DEFAULT_CLASS": "urgent"}, []string{`OMNIROUTE_PRIORITY_DEFAULT_CLASS="urgent"`, "interactive or batch"}},
		{map[string]string{"OMNIROUTE_PRIORITY_BATCH_SHARE": "50"}, []string{"OMNIROUTE_PRIORITY_INTERACTIVE_SHARE + OMNIROUTE_PRIORITY_BATCH_SHARE", "must be <= 100"}},
		{map[string]string{"OMNIROUTE_PRIORITY_BATCH_SHARE": "101"}, []string{`OMNIROUTE_PRIORITY_BATCH_SHARE="101"`, "0 to 100"}},
		{map[string]string{"ADAPTIVE_ADMISSION_GLOBAL_LIMIT": "-3"}, []string{`ADAPTIVE_ADMISSION_GLOBAL_LIMIT="-3"`}},
		{map[string]string{"ADAPTIVE_ADMISSION_GLOBAL_LIMIT": "200000000"}, []string{"ADAPTIVE_ADMISSION_GLOBAL_LIMIT=200000000: globalLimit must be 0 (none)"}},
		{map[string]string{"ADAPTIVE_ADMISSION_QUEUE_TARGET_MS": "2s"}, []string{`ADAPTIVE_ADMISSION_QUEUE_TARGET_MS="2s"`, "whole milliseconds"}},
	})
}

// TestEveryValidatedFieldNamesItsVariable: every field a validation
// error can name maps to the variable that sets it.
func TestEveryValidatedFieldNamesItsVariable(t *testing.T) {
	broken := admission.Config{Mode: 9, ClassShares: [admission.NumClasses]int64{90, 90}, GlobalLimit: -1, QueueTargetMs: -1, ClassIdleMs: -1}
	err := broken.Validate()
	if err == nil {
		t.Fatal("a broken config validated")
	}
	for _, fe := range err.(admission.Errors) {
		if strings.HasPrefix(fe.Field, "cost.") || fe.Field == "maxLanes" || fe.Field == "laneIdleMs" || fe.Field == "historyHalfLifeMs" {
			continue // not settable by environment
		}
		if _, ok := admissionVars[fe.Field]; !ok {
			t.Errorf("validation field %q has no variable in admissionVars", fe.Field)
		}
	}
}

func TestLanesFileSections(t *testing.T) {
	base := `{"providers":{"p":{"base_url":"http://127.0.0.1:1/v1","apis":["chat"],"auth":"none","connections":{"a":{},"b":{}}}},
"models":{"plain":{"targets":[{"connection":"p/a"}]},%s},"tenants":[%s],"auth":{"mode":"loopback"}}`
	ok := []struct{ models, tenants string }{
		{`"f":{"strategy":"fusion","targets":[{"connection":"p/a","model":"x"},{"connection":"p/b","model":"y","max_concurrent":4}],"fusion":{"quorum":2,"judge":"plain"}}`, `{"name":"ci","key_env":"K","class":"batch"}`},
		{`"f":{"strategy":"fusion","targets":[{"connection":"p/a","model":"x"},{"connection":"p/b","model":"y"}],"fusion":{"judge":"p/b/y","judge_prompt":"Pick: {{answers}}"}}`, `{"name":"ci","key_env":"K"}`},
		{`"f":{"strategy":"fusion","targets":[{"connection":"p/a","model":"x"},{"connection":"p/b","model":"y"}]}`, `{"name":"ci","key_env":"K","class":"interactive"}`},
	}
	for _, c := range ok {
		if _, err := DecodeFile(strings.NewReader(sprintf(base, c.models, c.tenants))); err != nil {
			t.Fatalf("valid config rejected: %v", err)
		}
	}
	bad := []struct{ models, tenants, want string }{
		{`"f":{"targets":[{"connection":"p/a"}]}`, `{"name":"ci","key_env":"K","class":"urgent"}`, `tenants[0].class: "urgent" is not a priority class`},
		{`"f":{"targets":[{"connection":"p/a"}],"fusion":{}}`, `{"name":"ci","key_env":"K"}`, `models.f.fusion: set only on a model with "strategy": "fusion"`},
		{`"f":{"strategy":"fusion","targets":[{"connection":"p/a"}]}`, `{"name":"ci","key_env":"K"}`, "models.f.targets: a fusion model needs at least 2 targets"},
		{`"f":{"strategy":"fusion","targets":[{"connection":"p/a","model":"x"},{"connection":"p/b"}],"fusion":{"quorum":3}}`, `{"name":"ci","key_env":"K"}`, "models.f.fusion.quorum: must be between 1 and the panel size 2"},
		{`"f":{"strategy":"fusion","targets":[{"connection":"p/a","model":"x"},{"connection":"p/b"}],"fusion":{"judge_prompt":"no placeholder"}}`, `{"name":"ci","key_env":"K"}`, "judge_prompt: must contain {{answers}}"},
		{`"f":{"strategy":"fusion","targets":[{"connection":"p/a","model":"x"},{"connection":"p/b"}],"fusion":{"judge":"nope"}}`, `{"name":"ci","key_env":"K"}`, `models.f.fusion.judge: "nope" is neither a model nor a target of this model (targets: p/a/x, p/b/f)`},
		{`"f":{"strategy":"fusion","targets":[{"connection":"p/a","model":"x"},{"connection":"p/b"}],"fusion":{"judge":"f"}}`, `{"name":"ci","key_env":"K"}`, "a fusion model cannot judge itself"},
		{`"f":{"targets":[{"connection":"p/a","max_concurrent":-1}]}`, `{"name":"ci","key_env":"K"}`, "models.f.targets[0].max_concurrent: must be between 0"},
	}
	for _, c := range bad {
		_, err := DecodeFile(strings.NewReader(sprintf(base, c.models, c.tenants)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("want error containing %q, got %v", c.want, err)
		}
	}
}

func sprintf(format string, args ...any) string {
	for _, a := range args {
		format = strings.Replace(format, "%s", a.(string), 1)
	}
	return format
}

func FuzzLanesEnvTypes(f *testing.F) {
	for _, s := range []string{"0", "1", "64", "9007199254740991", "9007199254740992", "-1", "1e3", " 5 ", "100", "101", "batch", "shadow"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var si SafeInt
		if err := si.UnmarshalText([]byte(s)); err == nil && (si < 1 || si > admission.MaxSafeInteger) {
			t.Fatalf("SafeInt accepted %q as %d", s, si)
		}
		var p WholePercent
		if err := p.UnmarshalText([]byte(s)); err == nil && (p < 0 || p > 100) {
			t.Fatalf("WholePercent accepted %q as %d", s, p)
		}
		var m AdmissionMode
		if err := m.UnmarshalText([]byte(s)); err == nil && admission.Mode(m) > admission.ModeEnforce {
			t.Fatalf("mode %q → %d", s, m)
		}
		var c Class
		if err := c.UnmarshalText([]byte(s)); err == nil && admission.Class(c) >= admission.NumClasses {
			t.Fatalf("class %q → %d", s, c)
		}
	})
}
