package edge

import "testing"

// TestHostAllowed: IP literals (v4 octets, bracketed v6), localhost and
// the configured names pass; any other name, or a malformed literal, does
// not (the DNS-rebinding check of browser.go).
func TestHostAllowed(t *testing.T) {
	p := browserPolicy{hosts: []string{"gw.internal"}}
	for host, want := range map[string]bool{
		"": true, "127.0.0.1": true, "127.0.0.1:20128": true, "10.1.2.3": true, "[::1]:80": true, "[::1]": true,
		"localhost": true, "LOCALHOST:1": true, "gw.internal": true, "GW.Internal:8443": true,
		"256.1.1.1": false, "1.2.3": false, "1.2.3.4.5": false, "1..2.3": false, "1.2.3.4444": false, "[::1": false, "[zz]": false,
		"evil.example": false, "gw.internal.evil.example": false, "localhost.evil.example": false, "127.0.0.1.nip.io": false,
	} {
		if got := p.hostAllowed([]byte(host)); got != want {
			t.Errorf("hostAllowed(%q) = %v, want %v", host, got, want)
		}
	}
}

// TestIsIPv4Literal: four dot-separated decimal octets of one to three
// digits, each at most 255, and nothing else.
func TestIsIPv4Literal(t *testing.T) {
	for in, want := range map[string]bool{
		"127.0.0.1":                  true,
		"0.0.0.0":                    true,
		"255.255.255.255":            true,
		"010.001.0.9":                true, // leading zeros: still three digits at most
		"256.0.0.1":                  false,
		"1.2.3":                      false,
		"1.2.3.4.5":                  false,
		"1.2.3.4.":                   false,
		".1.2.3.4":                   false,
		"1..2.3":                     false,
		"0001.2.3.4":                 false,
		"1.2.3.a":                    false,
		"1.2.3.-4":                   false,
		"1.2.3.+4":                   false,
		"1.2.3. 4":                   false,
		"":                           false,
		"localhost":                  false,
		"99999999999999999999.1.1.1": false,
	} {
		if got := isIPv4Literal([]byte(in)); got != want {
			t.Errorf("isIPv4Literal(%q) = %v, want %v", in, got, want)
		}
	}
}
