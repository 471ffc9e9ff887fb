package config

import (
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/admission"
	"github.com/omniroute/gateway/internal/tenantpolicy"
)

// withSections puts tenants and prices JSON into validFile.
func withSections(tenants, prices string) string {
	s := strings.Replace(validFile, `"tenants": [{"name": "alice", "key_env": "ALICE_KEY"}, {"name": "bob", "key_sha256": "`+
		"2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"+`"}],`, `"tenants": `+tenants+`,`, 1)
	if prices != "" {
		s = strings.Replace(s, `"auth": {"mode": "keys"}`, `"auth": {"mode": "keys"}, "prices": `+prices, 1)
	}
	return s
}

func TestTenantPoliciesAndPrices(t *testing.T) {
	f, err := DecodeFile(strings.NewReader(withSections(
		`[{"name": "agents", "key_env": "AGENTS_KEY", "requests_per_minute": 60, "tokens_per_minute": 400000, "max_concurrent": 4,
		   "daily_budget_usd": 20, "monthly_budget_usd": 300, "allowed_models": ["claude-*", "fast"], "class": "batch", "weight": 2}]`,
		`{"my-model": {"input": 1, "output": 2}, "gpt-4o*": {"input": 2.5, "output": 10, "cached_input": 1.25}}`)))
	if err != nil {
		t.Fatal(err)
	}
	p := f.Tenants[0].Policy
	if p.RequestsPerMinute != 60 || p.MaxConcurrent != 4 || p.MonthlyBudgetUSD != 300 || p.Class != "batch" || f.Tenants[0].Class != "batch" || p.Weight != 2 ||
		len(p.AllowedModels) != 2 || f.Prices["gpt-4o*"].CachedInput != 1.25 {
		t.Fatalf("%+v %+v", p, f.Prices)
	}
}

func TestTenantAndPriceErrorsNameThePath(t *testing.T) {
	const key = `"name": "a", "key_env": "A_KEY"`
	cases := []struct {
		tenants, prices string
		want            []string
	}{
		{`[{` + key + `}, {"name": "b", "key_env": "B_KEY", "rpm": 5}]`, "", []string{"tenants[1].rpm: unknown field"}},
		{`[{` + key + `, "tokens_per_minute": "lots"}]`, "", []string{"tenants[0].tokens_per_minute: wants int64"}},
		{`[{` + key + `, "max_concurrent": -1, "daily_budget_usd": -2}]`, "", []string{"tenants[0].max_concurrent: must be between 0", "tenants[0].daily_budget_usd: must be between 0"}},
		{`[{` + key + `, "allowed_models": ["gpt-4o", "claude[3]"]}]`, "", []string{"tenants[0].allowed_models[1]: model pattern"}},
		{`[{` + key + `}, {"name": "a", "key_env": "B_KEY"}]`, "", []string{`tenants[1].name: "a" is used twice`}},
		{`[{` + key + `, "class": "urgent"}]`, "", []string{`tenants[0].class: "urgent" is not a priority class`}},
		{`[{` + key + `, "weight": 5000}]`, "", []string{"tenants[0].weight: must be between 0"}},
		{`[{` + key + `}]`, `{"x": {"input": 1, "output": 2, "inptu": 3}}`, []string{"prices.x.inptu: unknown field"}},
		{`[{` + key + `}]`, `{"x": {"input": -1, "output": 2}, "bad pattern": {"input": 1, "output": 1}}`, []string{"prices.x.input: want US dollars", "prices.bad pattern: model pattern"}},
	}
	for _, c := range cases {
		checkFileError(t, c.tenants+" "+c.prices, withSections(c.tenants, c.prices), c.want)
	}
}

// TestPolicyClassesAreAdmissions holds the policy's class names to the
// admission classes they select.
func TestPolicyClassesAreAdmissions(t *testing.T) {
	for name, cl := range map[string]admission.Class{tenantpolicy.ClassInteractive: admission.Interactive, tenantpolicy.ClassBatch: admission.Batch} {
		if got, ok := admission.ParseClass(name); !ok || got != cl {
			t.Fatalf("class %q is not admission's %v", name, cl)
		}
	}
}

func TestRequestLogEnv(t *testing.T) {
	e, err := LoadEnv(map[string]string{})
	if err != nil || e.RequestLog.Mode != "db" || !e.RequestLog.Mode.DB() || e.RequestLog.Mode.Stdout() || e.RequestLog.RetentionDays != 30 {
		t.Fatalf("defaults %+v %v", e.RequestLog, err)
	}
	e, err = LoadEnv(map[string]string{"OMNIROUTE_REQUEST_LOG": "Both", "OMNIROUTE_REQUEST_LOG_RETENTION_DAYS": "0"})
	if err != nil || !e.RequestLog.Mode.DB() || !e.RequestLog.Mode.Stdout() || e.RequestLog.RetentionDays.Duration() != 0 {
		t.Fatalf("%+v %v", e.RequestLog, err)
	}
	if e, _ := LoadEnv(map[string]string{"OMNIROUTE_REQUEST_LOG": "off"}); e.RequestLog.Mode.DB() || e.RequestLog.Mode.Stdout() {
		t.Fatal("off logs")
	}
	checkEnvErrors(t, []envErrorCase{
		{map[string]string{"OMNIROUTE_REQUEST_LOG": "file"}, []string{`OMNIROUTE_REQUEST_LOG="file"`, "db, stdout, both or off"}},
		{map[string]string{"OMNIROUTE_REQUEST_LOG_RETENTION_DAYS": "-1"}, []string{`OMNIROUTE_REQUEST_LOG_RETENTION_DAYS="-1"`, "whole days"}},
		{map[string]string{"OMNIROUTE_REQUEST_LOG_RETENTION_DAYS": "7d"}, []string{"whole days"}},
	})
}
