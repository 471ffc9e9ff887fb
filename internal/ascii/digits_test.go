package ascii

import (
	"math"
	"strconv"
	"testing"
)

// TestParseDigits: each row is an input and what ParseDigits answers.
func TestParseDigits(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"7", 7, true},
		{"007", 7, true},
		{"1500", 1500, true},
		{"9223372036854775807", math.MaxInt64, true},
		{"00000000000000000000009223372036854775807", math.MaxInt64, true},
		{"9223372036854775808", 0, false}, // one past the largest int64
		{"18446744073709551615", 0, false},
		{"99999999999999999999", 0, false},
		{"", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{" 1", 0, false},
		{"1 ", 0, false},
		{"1_000", 0, false},
		{"1e3", 0, false},
		{"1.5", 0, false},
		{"0x10", 0, false},
		{"12a", 0, false},
		{"/", 0, false}, // '0'-1
		{":", 0, false}, // '9'+1
		{"٣", 0, false}, // a digit, but not an ASCII one
	} {
		got, ok := ParseDigits([]byte(c.in))
		if got != c.want || ok != c.ok {
			t.Errorf("ParseDigits(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// FuzzParseDigits holds ParseDigits to strconv.ParseUint in base 10
// within int64: whatever it accepts, ParseUint reads as the same value;
// whatever ParseUint reads as at most the largest int64, it accepts.
func FuzzParseDigits(f *testing.F) {
	for _, s := range []string{"0", "42", "9223372036854775807", "9223372036854775808", "-1", "+1", "1_0", " 1", "", "1e3", "0x1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, ok := ParseDigits(b)
		u, err := strconv.ParseUint(string(b), 10, 64)
		if ok && (err != nil || u != uint64(n)) {
			t.Fatalf("ParseDigits(%q) = %d, but ParseUint says %d, %v", b, n, u, err)
		}
		if !ok && err == nil && u <= math.MaxInt64 {
			t.Fatalf("ParseDigits(%q) refused what ParseUint reads as %d", b, u)
		}
		if !ok && n != 0 {
			t.Fatalf("ParseDigits(%q) refused but returned %d", b, n)
		}
	})
}
