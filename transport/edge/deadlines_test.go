package edge

import (
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func timeoutHeaders(stainless, ours string) *fasthttp.RequestHeader {
	var h fasthttp.RequestHeader
	if stainless != "" {
		h.Set("X-Stainless-Timeout", stainless)
	}
	if ours != "" {
		h.Set(TimeoutHeader, ours)
	}
	return &h
}

// TestCallerTimeout: what the caller says it will wait, from the SDKs'
// header (seconds, unreadable ignored) and the gateway's (milliseconds,
// unreadable refused); the shorter wins, capped at a day.
func TestCallerTimeout(t *testing.T) {
	for _, c := range []struct {
		stainless, ours string
		want            time.Duration
		invalid         bool
	}{
		{"", "", 0, false},
		{"600", "", 600 * time.Second, false},
		{"0.5", "", 500 * time.Millisecond, false},
		{"", "30000", 30 * time.Second, false},
		{"600", "30000", 30 * time.Second, false},
		{"10", "30000", 10 * time.Second, false},
		{"0", "", 0, false},
		{"-5", "", 0, false},
		{"soon", "", 0, false}, // the SDK's header: ignored when unreadable
		{"soon", "250", 250 * time.Millisecond, false},
		{"", "999999999999", MaxCallerTimeout, false},
		{"1e9", "", 0, false},
		{"100000000", "", MaxCallerTimeout, false},
		{"", "0", 0, true},
		{"", "-1", 0, true},
		{"", "1.5", 0, true},
		{"", "30s", 0, true},
		{"", " 300", 0, true},
		{"", "1000000000000", 0, true}, // 13 digits
		{"600", "x", 0, true},
	} {
		got, err := CallerTimeout(timeoutHeaders(c.stainless, c.ours))
		if (err != nil) != c.invalid || got != c.want {
			t.Errorf("stainless %q, ours %q: %v %v, want %v invalid=%v", c.stainless, c.ours, got, err, c.want, c.invalid)
		}
		if err != nil && (err.Status != 400 || err.Code != "invalid_timeout") {
			t.Errorf("ours %q: refused as %d %s", c.ours, err.Status, err.Code)
		}
	}
}

// FuzzCallerTimeout: no header value makes it panic, and an accepted
// value is a deadline within (0, MaxCallerTimeout], or none; the
// gateway's header alone is accepted exactly when it is 1 to 12 decimal
// digits, not all zero.
func FuzzCallerTimeout(f *testing.F) {
	for _, s := range [][2]string{{"600", "30000"}, {"0.5", ""}, {"", "999999999999"}, {"1e300", "1"}, {"NaN", "00"}, {"-0", "+1"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, stainless, ours string) {
		got, err := CallerTimeout(timeoutHeaders(stainless, ours))
		if err != nil {
			if got != 0 || err.Status != 400 {
				t.Fatalf("refused with %v and status %d", got, err.Status)
			}
		} else if got < 0 || got > MaxCallerTimeout {
			t.Fatalf("stainless %q ours %q: %v is outside [0, %v]", stainless, ours, got, MaxCallerTimeout)
		}
		if ours == "" || stainless != "" {
			return
		}
		// fasthttp keeps a header value as sent, but trims the spaces
		// around it: judge what it kept.
		v := string(timeoutHeaders("", ours).Peek(TimeoutHeader))
		if v == "" {
			return
		}
		digits := len(v) <= 12
		nonzero := false
		for _, c := range []byte(v) {
			digits = digits && c >= '0' && c <= '9'
			nonzero = nonzero || (c >= '1' && c <= '9')
		}
		if accepted := err == nil; accepted != (digits && nonzero) {
			t.Fatalf("ours %q: accepted %v", v, accepted)
		}
		if err == nil && got <= 0 {
			t.Fatalf("ours %q accepted as %v", v, got)
		}
	})
}
