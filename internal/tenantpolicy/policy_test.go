package tenantpolicy

import (
	"errors"
	"math"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		p    Policy
		want []string // paths named, in order
	}{
		{"empty is unlimited", Policy{}, nil},
		{"full", Policy{RequestsPerMinute: 60, TokensPerMinute: 400000, MaxConcurrent: 4, DailyBudgetUSD: 20, MonthlyBudgetUSD: 300,
			AllowedModels: []string{"claude-*", "gpt-4o", "openai/o?-mini"}, Class: "batch", Weight: 2}, nil},
		{"negative rpm", Policy{RequestsPerMinute: -1}, []string{"t.requests_per_minute"}},
		{"negative tpm", Policy{TokensPerMinute: -5}, []string{"t.tokens_per_minute"}},
		{"huge tpm", Policy{TokensPerMinute: MaxRate + 1}, []string{"t.tokens_per_minute"}},
		{"several windows", Policy{RequestsPerMinute: 15, RequestsPerHour: 200, RequestsPerDay: 1500, TokensPerMinute: 1000, TokensPerDay: 100000}, nil},
		{"a day below the minute: the minute could never be reached", Policy{RequestsPerMinute: 100, RequestsPerDay: 50}, []string{"t.requests_per_day"}},
		{"a day below the hour", Policy{TokensPerMinute: 10, TokensPerHour: 1000, TokensPerDay: 500}, []string{"t.tokens_per_day"}},
		{"an hour below the minute", Policy{TokensPerMinute: 1000, TokensPerHour: 500}, []string{"t.tokens_per_hour"}},
		{"negative hour", Policy{RequestsPerHour: -1}, []string{"t.requests_per_hour"}},
		{"negative concurrency", Policy{MaxConcurrent: -2}, []string{"t.max_concurrent"}},
		{"negative budgets", Policy{DailyBudgetUSD: -0.01, MonthlyBudgetUSD: -3}, []string{"t.daily_budget_usd", "t.monthly_budget_usd"}},
		{"nan budget", Policy{DailyBudgetUSD: math.NaN()}, []string{"t.daily_budget_usd"}},
		{"bad pattern", Policy{AllowedModels: []string{"gpt-4o", "claude[0-9]"}}, []string{"t.allowed_models[1]"}},
		{"empty pattern", Policy{AllowedModels: []string{""}}, []string{"t.allowed_models[0]"}},
		{"duplicate pattern", Policy{AllowedModels: []string{"a", "a"}}, []string{"t.allowed_models[1]"}},
		{"bad class", Policy{Class: "urgent"}, []string{"t.class"}},
		{"weight range", Policy{Weight: MaxWeight + 1}, []string{"t.weight"}},
		{"negative weight", Policy{Weight: -1}, []string{"t.weight"}},
	}
	for _, tc := range cases {
		err := tc.p.Validate("t")
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: unexpected error %v", tc.name, err)
			}
			continue
		}
		var es Errors
		if !errors.As(err, &es) || len(es) != len(tc.want) {
			t.Errorf("%s: got %v, want errors at %v", tc.name, err, tc.want)
			continue
		}
		for i, e := range es {
			if e.Path != tc.want[i] || e.Message == "" {
				t.Errorf("%s: error %d is %q, want path %q", tc.name, i, e, tc.want[i])
			}
		}
	}
	if err := (&Policy{RequestsPerMinute: -1}).Validate(""); err == nil || !strings.HasPrefix(err.Error(), "requests_per_minute: ") {
		t.Fatalf("no prefix: %v", err)
	}
	err := (&Policy{RequestsPerMinute: 100, RequestsPerDay: 50}).Validate("")
	if err == nil || !strings.Contains(err.Error(), "requests_per_day: 50 is below requests_per_minute (100)") {
		t.Fatalf("the error does not explain the window that could never be reached: %v", err)
	}
}

func TestDecode(t *testing.T) {
	p, err := Decode([]byte(`{"requests_per_minute":60,"allowed_models":["claude-*"],"daily_budget_usd":2.5}`))
	if err != nil || p.RequestsPerMinute != 60 || p.DailyBudgetUSD != 2.5 || len(p.AllowedModels) != 1 {
		t.Fatalf("%+v %v", p, err)
	}
	bad := []struct{ body, path string }{
		{`{"requests_per_minutes":60}`, "requests_per_minutes"},
		{`{"tokens_per_minute":"many"}`, "tokens_per_minute"},
		{`{"max_concurrent":-1}`, "max_concurrent"},
		{`{"allowed_models":["ok","bad pattern"]}`, "allowed_models[1]"},
	}
	for _, b := range bad {
		_, err := Decode([]byte(b.body))
		var fe FieldError
		var es Errors
		switch {
		case errors.As(err, &fe):
			if fe.Path != b.path {
				t.Errorf("%s: path %q, want %q", b.body, fe.Path, b.path)
			}
		case errors.As(err, &es):
			if es[0].Path != b.path {
				t.Errorf("%s: path %q, want %q", b.body, es[0].Path, b.path)
			}
		default:
			t.Errorf("%s: error %v names no field", b.body, err)
		}
	}
	for _, body := range []string{``, `{"weight":1} {}`, `{"weight":`} {
		if _, err := Decode([]byte(body)); err == nil {
			t.Errorf("%q accepted", body)
		}
	}
}

func TestAllowsModelAndMatch(t *testing.T) {
	p := Policy{AllowedModels: []string{"claude-*", "gpt-4o", "openai/*-mini", "o?"}}
	for name, want := range map[string]bool{
		"claude-sonnet-4-5": true, "claude-": true, "gpt-4o": true, "gpt-4o-mini": false,
		"openai/gpt-4o-mini": true, "openai/x/y-mini": true, "o3": true, "o33": false, "Claude-x": false, "": false,
	} {
		if got := p.AllowsModel([]byte(name)); got != want {
			t.Errorf("AllowsModel(%q) = %v, want %v", name, got, want)
		}
	}
	if !(&Policy{}).AllowsModel([]byte("anything")) {
		t.Fatal("an empty list must allow every model")
	}
	if !MatchString("*", "") || !MatchString("a*b*c", "aXbYbZc") || MatchString("a*b", "a") || !MatchString("**x", "x") {
		t.Fatal("wildcard semantics")
	}
}

// globRegexp is the reference semantics Match must agree with.
func globRegexp(p string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '*':
			b.WriteString("(?s:.*)")
		case '?':
			b.WriteString("(?s:.)")
		default:
			b.WriteString(regexp.QuoteMeta(p[i : i+1]))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

func FuzzMatch(f *testing.F) {
	f.Add("claude-*", "claude-sonnet")
	f.Add("a*b?c*", "aXXbYcZZ")
	f.Add("*-mini", "gpt-4o-mini")
	f.Add("*", "*0") // a literal star in the name is still matched by the wildcard
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if len(pattern) > 40 || len(name) > 80 {
			return
		}
		// bytes >= 0x80 in name would make the regexp see runes; Match is
		// byte-wise, so keep the property to single-byte characters.
		for i := 0; i < len(name); i++ {
			if name[i] >= 0x80 {
				return
			}
		}
		for i := 0; i < len(pattern); i++ {
			if pattern[i] >= 0x80 {
				return
			}
		}
		if got, want := Match(pattern, []byte(name)), globRegexp(pattern).MatchString(name); got != want {
			t.Fatalf("Match(%q, %q) = %v, want %v", pattern, name, got, want)
		}
	})
}

// TestFieldsAreTheStruct holds the field list, the struct's JSON names and
// docs/tenants.md together.
func TestFieldsAreTheStruct(t *testing.T) {
	rt := reflect.TypeOf(Policy{})
	if rt.NumField() != len(Fields) {
		t.Fatalf("Policy has %d fields, Fields lists %d", rt.NumField(), len(Fields))
	}
	doc, err := os.ReadFile("../../docs/tenants.md")
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range Fields {
		tag := strings.Split(rt.Field(i).Tag.Get("json"), ",")[0]
		if tag != f.Name {
			t.Errorf("field %d: struct says %q, Fields says %q", i, tag, f.Name)
		}
		if f.Doc == "" || f.check == nil {
			t.Errorf("field %q has no doc or check", f.Name)
		}
		if !strings.Contains(string(doc), "| `"+f.Name+"` |") {
			t.Errorf("docs/tenants.md has no table row for %s", f.Name)
		}
	}
}

func TestLimitedAndWeight(t *testing.T) {
	if (&Policy{Class: "batch", Weight: 3}).Limited() {
		t.Fatal("class and weight are not limits")
	}
	if !(&Policy{AllowedModels: []string{"x"}}).Limited() || !(&Policy{MonthlyBudgetUSD: 1}).Limited() {
		t.Fatal("models and budgets are limits")
	}
	if (&Policy{}).EffectiveWeight() != 1 || (&Policy{Weight: 7}).EffectiveWeight() != 7 {
		t.Fatal("weight default")
	}
}
