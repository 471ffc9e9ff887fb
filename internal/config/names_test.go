package config

import (
	"regexp"
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/keys"
)

// TestNameRulesAreTheCountedPatterns: each name rule (a character class
// and a length checked apart) accepts exactly what its counted pattern
// did, at and around every bound, for allowed, refused and non-ASCII
// characters; keys.ValidateName keeps the tenant-name rule.
func TestNameRulesAreTheCountedPatterns(t *testing.T) {
	rules := []struct {
		name    string
		rule    bounded
		counted *regexp.Regexp
		first   string // an allowed first character
		rest    string // allowed characters after it
	}{
		{"name", nameRE, regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`), "a", "Z9._-"},
		{"model", modelRE, regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$`), "7", "a._:/@+-"},
		{"envVar", envVarRE, regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`), "_", "A0_"},
		{"hex", hexRE, regexp.MustCompile(`^[0-9a-f]{64}$`), "0", "9af"},
		{"header", headerRE, regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`), "-", "aZ0-"},
	}
	refused := []string{" ", ".", "é", "\n", "*", "G", "$"}
	for _, r := range rules {
		var cases []string
		for n := 0; n <= 131; n++ {
			s := ""
			if n > 0 {
				s = r.first + strings.Repeat(r.rest, n)[:n-1]
			}
			cases = append(cases, s)
			for _, bad := range refused {
				cases = append(cases, bad+s, s+bad)
				if n > 2 {
					cases = append(cases, s[:n/2]+bad+s[n/2:])
				}
			}
		}
		for _, s := range cases {
			if got, want := r.rule.MatchString(s), r.counted.MatchString(s); got != want {
				t.Errorf("%s rule on %q (%d bytes): %v, the counted pattern %v", r.name, s, len(s), got, want)
			}
			if r.name == "name" {
				if got, want := keys.ValidateName(s) == nil, r.counted.MatchString(s); got != want {
					t.Errorf("keys.ValidateName(%q) (%d bytes) accepts: %v, the tenant-name rule %v", s, len(s), got, want)
				}
			}
		}
	}
}
