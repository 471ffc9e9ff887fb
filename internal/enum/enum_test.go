package enum

import "testing"

type color uint8

var colorNames = [...]string{"", "red", "green"}

func TestName(t *testing.T) {
	for _, c := range []struct {
		v    color
		want string
	}{{0, ""}, {1, "red"}, {2, "green"}, {3, "unknown"}, {255, "unknown"}} {
		if got := Name(colorNames[:], c.v, "unknown"); got != c.want {
			t.Errorf("Name(%d) = %q, want %q", c.v, got, c.want)
		}
	}
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		s    string
		want color
		ok   bool
	}{{"red", 1, true}, {"green", 2, true}, {"", 0, false}, {"blue", 0, false}, {"Red", 0, false}} {
		if got, ok := Parse[color](colorNames[:], c.s); got != c.want || ok != c.ok {
			t.Errorf("Parse(%q) = %d, %v, want %d, %v", c.s, got, ok, c.want, c.ok)
		}
	}
}

func TestNameDoesNotAllocate(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = Name(colorNames[:], color(2), "unknown") }); n != 0 {
		t.Fatalf("Name allocates %v times per call; String methods sit on metric and log paths", n)
	}
}
