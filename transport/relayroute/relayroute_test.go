package relayroute

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSplitBase(t *testing.T) {
	for _, tc := range []struct {
		base, hostport, prefix string
		tls, bad               bool
	}{
		{base: "http://127.0.0.1:8080", hostport: "127.0.0.1:8080"},
		{base: "http://127.0.0.1:8080/v1/", hostport: "127.0.0.1:8080", prefix: "/v1"},
		{base: "https://bifrost.internal/api", hostport: "bifrost.internal:443", tls: true, prefix: "/api"},
		{base: "http://bifrost.internal", hostport: "bifrost.internal:80"},
		{base: "http://[::1]:9/x", hostport: "[::1]:9", prefix: "/x"},
		{base: "http://bad host/", bad: true},
	} {
		hp, tls, prefix, err := splitBase(tc.base)
		if tc.bad {
			if err == nil {
				t.Errorf("%s: accepted as %s", tc.base, hp)
			}
			continue
		}
		if err != nil || hp != tc.hostport || tls != tc.tls || prefix != tc.prefix {
			t.Errorf("%s: %q %v %q %v; want %q %v %q", tc.base, hp, tls, prefix, err, tc.hostport, tc.tls, tc.prefix)
		}
	}
}

// TestBriefHidesTheEndpoint: what health shows callers the management
// routes refuse keeps the backend choice and drops the endpoint, token
// count and why Bifrost is unavailable.
func TestBriefHidesTheEndpoint(t *testing.T) {
	full := map[string]any{"configuredBackend": "auto", "backend": "native", "tokens": 3,
		"bifrost": map[string]any{"endpoint": "http://10.0.0.7:8080", "unavailableReason": "service down"}}
	b, err := json.Marshal(Brief(full, "ask the management routes"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, hidden := range []string{"10.0.0.7", "service down", "tokens"} {
		if strings.Contains(s, hidden) {
			t.Fatalf("brief shows %q: %s", hidden, s)
		}
	}
	if !strings.Contains(s, `"backend":"native"`) || !strings.Contains(s, `"configuredBackend":"auto"`) || !strings.Contains(s, "ask the management routes") {
		t.Fatalf("brief lost the backend choice or the detail hint: %s", s)
	}
}
