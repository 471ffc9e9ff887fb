package ringbuf

import (
	"strings"
	"testing"
)

func TestTailKeepsTheLastMaxBytes(t *testing.T) {
	tail := &Tail{Max: 8}
	for _, w := range []string{"  abc", "defgh", "ijk \n"} {
		n, err := tail.Write([]byte(w))
		if n != len(w) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; want %d, nil", w, n, err, len(w))
		}
	}
	if got := tail.String(); got != "fghijk" {
		t.Errorf("String() = %q; want %q (the last 8 bytes %q, trimmed)", got, "fghijk", "fghijk \n")
	}
	big := strings.Repeat("x", 20) + "end"
	tail.Write([]byte(big))
	if got := tail.String(); got != "xxxxxend" {
		t.Errorf("after one write larger than Max, String() = %q; want %q", got, "xxxxxend")
	}
}

func TestTailEmpty(t *testing.T) {
	tail := &Tail{Max: 8}
	tail.Write([]byte(" \n\t"))
	if got := tail.String(); got != "" {
		t.Errorf("String() of white space = %q; want empty", got)
	}
}
