package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/omniroute/gateway/internal/pricing"
	"github.com/omniroute/gateway/internal/tenantpolicy"
)

// TenantList is the tenants section. Each entry is decoded on its own so
// that an unknown or mistyped field is reported with its entry's path
// (tenants[2].rpm), which encoding/json alone does not give.
type TenantList []Tenant

// UnmarshalJSON implements json.Unmarshaler.
func (l *TenantList) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return errors.New("tenants: want a list of tenant objects")
	}
	out := make(TenantList, len(raw))
	for i, r := range raw {
		if err := tenantpolicy.DecodeStrict(r, &out[i]); err != nil {
			return atPath(fmt.Sprintf("tenants[%d]", i), err)
		}
	}
	*l = out
	return nil
}

// PriceTable is the prices section: model name or glob → price per
// million tokens, overriding the shipped defaults (internal/pricing).
type PriceTable map[string]pricing.Price

// UnmarshalJSON implements json.Unmarshaler, strictly per entry.
func (t *PriceTable) UnmarshalJSON(b []byte) error {
	return decodeTable(b, (*map[string]pricing.Price)(t), "prices", "an object of model name or pattern → {input, output, …}")
}

// decodeTable is the UnmarshalJSON of the sections that map a name or
// pattern to an entry: each entry decoded on its own, strictly, in name
// order, so the first mistake is the same on every run and names its entry
// (section.name); what says what the section must be when b is no object.
func decodeTable[V any](b []byte, dst *map[string]V, section, what string) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return errors.New(section + ": want " + what)
	}
	out := make(map[string]V, len(raw))
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		var v V
		if err := tenantpolicy.DecodeStrict(raw[k], &v); err != nil {
			return atPath(section+"."+k, err)
		}
		out[k] = v
	}
	*dst = out
	return nil
}

// atPath prefixes a decoding error with the JSON path of its entry.
func atPath(path string, err error) error {
	var fe tenantpolicy.FieldError
	if errors.As(err, &fe) {
		if fe.Path == "" {
			return tenantpolicy.FieldError{Path: path, Message: fe.Message}
		}
		return tenantpolicy.FieldError{Path: path + "." + fe.Path, Message: fe.Message}
	}
	return fmt.Errorf("%s: %v", path, err)
}

func init() { fileValidators = append(fileValidators, validateTenantsAndPrices) }

// validateTenantsAndPrices checks every tenant's policy (one source of
// truth: tenantpolicy.Fields) and every price entry.
func validateTenantsAndPrices(f *File) []string {
	var errs []string
	for i := range f.Tenants {
		if err := f.Tenants[i].Policy.Validate(fmt.Sprintf("tenants[%d]", i)); err != nil {
			for _, e := range err.(tenantpolicy.Errors) {
				errs = append(errs, e.Error())
			}
		}
	}
	for k, p := range sorted(f.Prices) {
		errs = append(errs, pricing.Validate("prices."+k, k, p)...)
	}
	return errs
}
