package transport_test

import (
	"strings"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/clock"
	"github.com/omniroute/gateway/transport/gateway"
)

// TestManagementKeyGuessesAreSlowedDown: ten wrong management keys from
// one address are answered 401; from then on that address's key
// attempts are answered 429 too_many_key_attempts before the key is
// compared (the right key too: no oracle), on every management surface
// and in health's view, until its guesses refill, one per 6 s. Another
// address is not affected, and a caller sending no key is no guesser.
func TestManagementKeyGuessesAreSlowedDown(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 3, 14, 10, 0, 0, 0, time.UTC))
	const key = "mgmt-key-0123456789"
	g := startGatewayWith(t, testFile(t, ""), map[string]string{"OMNIROUTE_MANAGEMENT_KEY": key}, gateway.Options{Clock: clk})
	right, wrong := "Bearer "+key, "Bearer not-the-key"
	for i := 0; i < 10; i++ {
		if status, body, _ := callAs(g, "127.0.0.1:5000", "GET", "/api/keys", wrong); status != 401 {
			t.Fatalf("wrong key %d: %d %s", i, status, body)
		}
	}
	for _, path := range []string{"/api/keys", "/api/services", "/api/omniroute/quota", "/api/dashboard/snapshot"} {
		status, body, h := callAs(g, "127.0.0.1:5000", "GET", path, right)
		if status != 429 || !strings.Contains(string(body), "too_many_key_attempts") || string(h.Peek("Retry-After")) != "6" {
			t.Fatalf("%s with the right key after ten wrong ones: %d %s %q", path, status, body, h.Peek("Retry-After"))
		}
	}
	if _, body, _ := callAs(g, "127.0.0.1:5000", "GET", "/api/monitoring/health", right); strings.Contains(string(body), `"pid"`) || !strings.Contains(string(body), `"status"`) {
		t.Fatalf("health while the address is held back: %s", body)
	}
	if status, body, _ := callAs(g, "127.0.0.1:5000", "GET", "/api/keys", ""); status != 401 || !strings.Contains(string(body), "missing_management_key") {
		t.Fatalf("no key at all: %d %s", status, body)
	}
	if status, body, _ := callAs(g, "192.168.1.7:5000", "GET", "/api/keys", right); status != 200 {
		t.Fatalf("another address: %d %s", status, body)
	}
	clk.Advance(6 * time.Second)
	if status, body, _ := callAs(g, "127.0.0.1:5000", "GET", "/api/keys", right); status != 200 {
		t.Fatalf("after 6 s, the right key: %d %s", status, body)
	}
	// One guess refilled and the right key cost none: one wrong key is
	// answered, the next is held back again.
	if status, _, _ := callAs(g, "127.0.0.1:5000", "GET", "/api/keys", wrong); status != 401 {
		t.Fatalf("the refilled guess: %d", status)
	}
	if status, _, _ := callAs(g, "127.0.0.1:5000", "GET", "/api/keys", wrong); status != 429 {
		t.Fatalf("the guess after it: %d", status)
	}
}
