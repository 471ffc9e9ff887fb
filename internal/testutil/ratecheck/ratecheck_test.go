package ratecheck

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func TestRoomAt(t *testing.T) {
	// Arrivals after a moment do not take its room away: with arrivals at
	// 0 s and twice at 30 s and a limit of 3, the minute ending at 20 s
	// holds one, though one more at 20 s would make the minute from 0 s
	// hold four. Whoever arrived at 30 s took room that 20 s had.
	later := []time.Time{at(0), at(30), at(30)}
	if got := roomAt(later, at(20), 3); !got.Equal(at(20)) {
		t.Errorf("with arrivals at 0, 30, 30: room at %v, want 20 s", got.Sub(t0))
	}
	if got := roomAt(later, at(40), 3); !got.Equal(at(60)) {
		t.Errorf("with arrivals at 0, 30, 30: room from 40 s at %v, want 60 s (when the one at 0 s leaves)", got.Sub(t0))
	}
	checkFullMinute(t, "room", roomAt)
}

func TestFitsAt(t *testing.T) {
	// Arrivals after t (admitted before it) count in the minutes that hold
	// t: with arrivals at 0 s and twice at 30 s and a limit of 3, one more
	// at 20 s would make the minute from 0 s hold four.
	later := []time.Time{at(0), at(30), at(30)}
	if got := fitsAt(later, at(20), 3); !got.Equal(at(60)) {
		t.Errorf("with arrivals at 0, 30, 30: fits at %v, want 60 s (when the one at 0 s leaves)", got.Sub(t0))
	}
	checkFullMinute(t, "fits", fitsAt)
}

// checkFullMinute holds earliest (roomAt or fitsAt, named what) to the
// cases of a minute that three arrivals filled: the answer is t while the
// limit leaves room, else when the first arrival leaves the minute.
func checkFullMinute(t *testing.T, what string, earliest func([]time.Time, time.Time, int) time.Time) {
	t.Helper()
	arr := []time.Time{at(0), at(1), at(2)} // a limit of 3 a minute, used
	for _, c := range []struct {
		t, want float64
		limit   int
	}{
		{5, 60, 3},  // the first leaves the minute at 60 s
		{60, 60, 3}, // and then there is room
		{61.5, 61.5, 3},
		{5, 5, 4}, // room under a limit of 4
	} {
		if got := earliest(arr, at(c.t), c.limit); !got.Equal(at(c.want)) {
			t.Errorf("at %vs, limit %d: %s at %v, want %vs", c.t, c.limit, what, got.Sub(t0), c.want)
		}
	}
}

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recorder) Error(args ...any)   { r.errs = append(r.errs, fmt.Sprint(args...)) }
func (r *recorder) Logf(string, ...any) {}

// TestCheckCatchesWhatItShould: a run the limit was kept in passes; too
// many in a minute, a Retry-After too short or too long, a request
// reaching the provider well before a Retry-After, and too little served
// each fail, for that reason alone.
func TestCheckCatchesWhatItShould(t *testing.T) {
	lim := Limit{Requests: 3, Duration: time.Minute, Slack: 3 * time.Second}
	good := []time.Time{at(0), at(1), at(2)}
	refusal := func(s, retry float64) *Run {
		return &Run{sends: []Send{{At: at(0), Status: 200}, {At: at(1), Status: 200}, {At: at(2), Status: 200},
			{At: at(s), Status: 429, RetryAfter: time.Duration(retry * float64(time.Second))}}}
	}
	for _, c := range []struct {
		name string
		run  *Run
		arr  []time.Time
		lim  Limit
		want string // "" passes
	}{
		{"kept", refusal(3, 58), good, lim, ""},
		{"four in a minute", refusal(30, 31), append(good, at(30)), lim, "more than the limit of 3"},
		{"Retry-After too short", refusal(3, 50), good, lim, "full until"},
		{"Retry-After too long", refusal(3, 63), good, lim, "after the request would have fitted"},
		{"a request well before the Retry-After", refusal(3, 58.5), append(good, at(60.2)), lim, "before it"},
		{"too little served", refusal(3, 58), good, Limit{Requests: 3, Duration: 2 * time.Minute, Slack: 3 * time.Second}, "less than 90 %"},
	} {
		r := &recorder{TB: t}
		Check(r, c.run, c.arr, c.lim)
		switch {
		case c.want == "" && len(r.errs) > 0:
			t.Errorf("%s: failed: %v", c.name, r.errs)
		case c.want != "" && (len(r.errs) != 1 || !strings.Contains(r.errs[0], c.want)):
			t.Errorf("%s: %v, want one failure saying %q", c.name, r.errs, c.want)
		}
	}
}

// TestRetryAfterTruthful: the rule for a refusal's Retry-After, with a
// limit of 3 a minute used at 0, 1 and 2 s, so the provider's minute has
// room again at 60 s, and another caller's request arriving at 60.2 s,
// within Grace of the refusal (so it may have been admitted before it).
// A Retry-After pointing before 60 s is early, one more than Slack after
// it late (counting from 61 s, when one more fits if the arrival at 60.2 s
// was admitted before the refusal); one pointing at 60 s is true although
// the other caller took the unit that freed then (as a provider's own
// Retry-After may be).
func TestRetryAfterTruthful(t *testing.T) {
	lim := Limit{Requests: 3, Duration: time.Minute, Slack: 3 * time.Second, Grace: 1500 * time.Millisecond}
	arr := []time.Time{at(0), at(1), at(2), at(60.2)}
	for _, c := range []struct {
		name          string
		refused, wait float64
		want          string // "" passes
	}{
		{"early", 58, 1, "full until"},
		{"late", 59, 6, "after the request would have fitted"},
		// The arrival at 60.2 s may have been admitted before the refusal
		// (credit granted earlier): a request then fits at 61 s, and a
		// Retry-After pointing there is not late.
		{"the unit spent by credit granted before", 59, 5, ""},
		{"the unit taken by another caller", 59, 1, ""},
	} {
		run := &Run{sends: []Send{{At: at(0), Status: 200}, {At: at(1), Status: 200}, {At: at(2), Status: 200},
			{At: at(c.refused), Status: 429, RetryAfter: time.Duration(c.wait * float64(time.Second))},
			{At: at(60.1), Status: 200}}}
		r := &recorder{TB: t}
		Check(r, run, arr, lim)
		switch {
		case c.want == "" && len(r.errs) > 0:
			t.Errorf("%s: failed: %v", c.name, r.errs)
		case c.want != "" && (len(r.errs) != 1 || !strings.Contains(r.errs[0], c.want)):
			t.Errorf("%s: %v, want one failure saying %q", c.name, r.errs, c.want)
		}
	}
}
