package limits

import (
	"fmt"

	"github.com/omniroute/gateway/actors/keys"
	"github.com/omniroute/gateway/internal/catalog"
	"github.com/omniroute/gateway/internal/config"
	"github.com/omniroute/gateway/internal/tenantpolicy"
)

// The rules a tenant's policy is held to, the config file's tenants' (at
// start-up and at every reload) and the keys API's (port.Pipeline's
// CheckPolicy): here because they follow from what the limits stage does
// with a policy. A token window must fit the reservation of a request
// that sets no output limit, and an allowed model must exist.

// ConfigTenants reads the config file's tenants for the keys actor, and
// checks their allowed models against the catalog and their token
// windows against the default output reservation (minTokens). digest is
// tenant i's key digest (its key_env or key_sha256).
func ConfigTenants(tenants []config.Tenant, digest func(i int, t config.Tenant) ([32]byte, error), cat *catalog.Catalog, minTokens int64) ([]keys.ConfigTenant, error) {
	var out []keys.ConfigTenant
	for i, t := range tenants {
		d, err := digest(i, t)
		if err != nil {
			return nil, err
		}
		prefix := fmt.Sprintf("tenants[%d].", i)
		if err := CheckModels(cat, prefix, t.Policy.AllowedModels); err != nil {
			return nil, err
		}
		if err := CheckTokenWindows(&t.Policy, minTokens, prefix); err != nil {
			return nil, err
		}
		out = append(out, keys.ConfigTenant{Name: t.Name, KeySHA256: d, Policy: t.Policy})
	}
	return out, nil
}

// CheckTokenWindows refuses a token window a request without max_tokens
// could never fit (config.MinCostProblems).
func CheckTokenWindows(p *tenantpolicy.Policy, minTokens int64, prefix string) error {
	if probs := config.MinCostProblems(p.Rates(), minTokens); len(probs) > 0 {
		return tenantpolicy.FieldError{Path: prefix + probs[0].Field, Message: probs[0].Message}
	}
	return nil
}

// CheckModels refuses an allowed_models entry that names or matches none
// of the gateway's models: it could only refuse the tenant's requests.
func CheckModels(cat *catalog.Catalog, prefix string, patterns []string) error {
	for i, pat := range patterns {
		found := false
		for _, m := range cat.Models {
			if tenantpolicy.MatchString(pat, m.Name) {
				found = true
				break
			}
		}
		if !found {
			return tenantpolicy.FieldError{Path: fmt.Sprintf("%sallowed_models[%d]", prefix, i),
				Message: fmt.Sprintf("%q matches none of this gateway's models (GET /v1/models lists them); fix the name or pattern", pat)}
		}
	}
	return nil
}
