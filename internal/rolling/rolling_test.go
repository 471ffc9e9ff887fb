package rolling

import (
	"math/rand/v2"
	"testing"
	"time"
)

// t0 is a slot boundary of every period (a UTC midnight).
var t0 = time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC).UnixNano()

const sec = int64(time.Second)

func lim(d Dim, p Period, v int64) Limits {
	var l Limits
	l[d][p] = v
	return l
}

func req() Cost { return Cost{Requests: 1} }

func tok(n int64) Cost { return Cost{Tokens: n} }

// op is one step of a script: reserve cost at at (seconds since t0) and
// expect ok (and, refused, the retry time and the refusing window); or
// settle the reservation of step settle.
type op struct {
	at      float64
	cost    Cost
	ok      bool
	retry   float64 // seconds since t0, checked when > 0
	dim     Dim
	period  Period
	settle  int // index of the step to settle, or -1
	actual  int64
	refund  bool
	remains map[Dim]int64 // the tightest remaining after the step, when set
}

func at(s float64) int64 { return t0 + int64(s*float64(sec)) }

func rsv(s float64, c Cost, ok bool, retry float64) op {
	return op{at: s, cost: c, ok: ok, retry: retry, settle: -1}
}

func stl(s float64, which int, actual int64, refund bool) op {
	return op{at: s, settle: which, actual: actual, refund: refund}
}

func TestScripts(t *testing.T) {
	both := lim(Requests, Minute, 3).Min(lim(Requests, Day, 5))
	tokens := lim(Tokens, Minute, 100)
	cases := []struct {
		name string
		l    Limits
		ops  []op
	}{
		{"a burst of the whole limit, then nothing until the first slot leaves", lim(Requests, Minute, 3), []op{
			rsv(0, req(), true, 0), rsv(0.2, req(), true, 0), rsv(0.4, req(), true, 0),
			// Slot 0 (all three) leaves when slot 62 starts: 60 s + the margin slot + its own.
			rsv(0.5, req(), false, 62), rsv(61.9, req(), false, 62), rsv(62, req(), true, 0),
		}},
		{"no burst at a minute boundary", lim(Requests, Minute, 3), []op{
			rsv(58, req(), true, 0), rsv(59, req(), true, 0), rsv(59.9, req(), true, 0),
			rsv(60, req(), false, 120), rsv(60.5, req(), false, 120), rsv(119.9, req(), false, 120), rsv(120, req(), true, 0),
		}},
		{"steady refill: one slot leaves, one request fits", lim(Requests, Minute, 3), []op{
			rsv(0, req(), true, 0), rsv(10, req(), true, 0), rsv(20, req(), true, 0),
			rsv(30, req(), false, 62), rsv(62, req(), true, 0), rsv(62.5, req(), false, 72), rsv(72, req(), true, 0),
		}},
		{"the retry needs as many slots to leave as the cost is over", tokens, []op{
			rsv(0, tok(40), true, 0), rsv(5, tok(30), true, 0), rsv(10, tok(30), true, 0),
			rsv(11, tok(50), false, 67), // 40 leaving at 62 is not enough room for 50 (30+30+50 > 100); at 67 it is
			rsv(11, tok(30), false, 62),
		}},
		{"a request larger than the whole limit waits for an empty window", tokens, []op{
			rsv(0, tok(10), true, 0), rsv(1, tok(150), false, 62), rsv(62, tok(150), true, 0), rsv(63, tok(1), false, 124),
		}},
		{"settling below the estimate gives the tokens back to the slot charged", tokens, []op{
			rsv(0, tok(80), true, 0), rsv(1, tok(30), false, 62),
			stl(2, 0, 50, false), // 30 tokens back: 50 are used
			rsv(3, tok(30), true, 0), rsv(4, tok(30), false, 62),
		}},
		{"settling above the estimate charges the rest when it is known", tokens, []op{
			rsv(0, tok(50), true, 0), stl(30, 0, 90, false), // 40 more, at 30 s
			rsv(31, tok(20), false, 62), // 90 held; the 50 at 0 s leave at 62 s
			rsv(62, tok(20), true, 0), rsv(63, tok(50), false, 92),
		}},
		{"a refund gives back the request and every token", lim(Requests, Minute, 1).Min(tokens), []op{
			rsv(0, Cost{1, 100}, true, 0), rsv(1, Cost{1, 1}, false, 62),
			stl(2, 0, 0, true),
			rsv(3, Cost{1, 100}, true, 0),
		}},
		{"a window of a dimension the request does not use cannot refuse it", lim(Requests, Minute, 3).Min(tokens), []op{
			rsv(0, Cost{1, 100}, true, 0), stl(1, 0, 150, false), // 150 of 100 tokens used
			rsv(2, req(), true, 0), rsv(3, Cost{1, 1}, false, 62), rsv(4, req(), true, 0), rsv(5, req(), false, 62),
		}},
		{"a refund after the slot left its span changes nothing", lim(Requests, Minute, 1), []op{
			rsv(0, req(), true, 0), rsv(62, req(), true, 0), stl(63, 0, 0, true), rsv(64, req(), false, 124),
		}},
		{"several windows: the request must fit all of them", both, []op{
			rsv(0, req(), true, 0), rsv(1, req(), true, 0), rsv(2, req(), true, 0),
			{at: 3, cost: req(), ok: false, retry: 62, dim: Requests, period: Minute, settle: -1},
			rsv(62, req(), true, 0), rsv(63, req(), true, 0),
			// The day's 5 are used: its first slot (24 min) leaves after a day and two slots.
			{at: 130, cost: req(), ok: false, retry: 86400 + 2*1440, dim: Requests, period: Day, settle: -1},
		}},
		{"the refusal names the window that frees last", both, []op{
			rsv(0, req(), true, 0), rsv(1, req(), true, 0), rsv(2, req(), true, 0),
			rsv(62, req(), true, 0), rsv(63, req(), true, 0),
			rsv(64, req(), true, 0), // wait: this one is refused below
		}},
	}
	cases[len(cases)-1].ops[len(cases[len(cases)-1].ops)-1] = op{at: 64, cost: req(), ok: false, retry: 86400 + 2*1440, dim: Requests, period: Day, settle: -1}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := NewWindows(c.l, 0)
			res := make([]Reservation, len(c.ops))
			for i, o := range c.ops {
				now := at(o.at)
				if o.settle >= 0 {
					w.Settle(now, &res[o.settle], o.actual, o.refund)
					if res[o.settle].Active() {
						t.Fatalf("step %d: the reservation is still active after Settle", i)
					}
					continue
				}
				r, ref, ok := w.Reserve(now, o.cost)
				res[i] = r
				if ok != o.ok || r.Active() != ok {
					t.Fatalf("step %d at %vs: admitted %v, want %v (refusal %+v)", i, o.at, ok, o.ok, ref)
				}
				if !ok && o.retry > 0 && ref.RetryAt != at(o.retry) {
					t.Fatalf("step %d at %vs: retry at %vs, want %vs", i, o.at, float64(ref.RetryAt-t0)/float64(sec), o.retry)
				}
				if !ok && (ref.Dim != o.dim || ref.Period != o.period) && (o.dim != 0 || o.period != 0) {
					t.Fatalf("step %d: refused by %v/%v, want %v/%v", i, ref.Dim, ref.Period, o.dim, o.period)
				}
				if !ok {
					// The retry is truthful: the request fits then, and
					// not a nanosecond earlier.
					if _, fits := w.clone().Fits(ref.RetryAt, o.cost); !fits {
						t.Fatalf("step %d: the request does not fit at its retry time", i)
					}
					if _, fits := w.clone().Fits(ref.RetryAt-1, o.cost); fits {
						t.Fatalf("step %d: the request already fits before its retry time", i)
					}
				}
			}
		})
	}
}

// clone copies w, so a test can look ahead in time without moving w's
// rings (a ring never goes back).
func (w *Windows) clone() *Windows {
	c := *w
	for d := range c.r {
		for p, r := range c.r[d] {
			if r != nil {
				rc := *r
				rc.c = append([]int64(nil), r.c...)
				c.r[d][p] = &rc
			}
		}
	}
	return &c
}

// A ring never goes back, so a Reserve at an earlier time than the last
// one charges the head slot: concurrent callers whose clocks read a little
// apart, counted a little longer.
func TestAnEarlierClockChargesTheHead(t *testing.T) {
	w := NewWindows(lim(Requests, Minute, 2), 0)
	if _, _, ok := w.Reserve(at(10), req()); !ok {
		t.Fatal("refused")
	}
	if _, _, ok := w.Reserve(at(5), req()); !ok {
		t.Fatal("refused")
	}
	if _, ok := w.Fits(at(71.9), req()); ok {
		t.Fatal("the request charged at an earlier time left with slot 5, not with the head it was charged to")
	}
	if _, ok := w.Fits(at(72), req()); !ok {
		t.Fatal("both should have left at 72 s")
	}
}

func TestBuckets(t *testing.T) {
	l := lim(Requests, Minute, 10).Min(lim(Requests, Day, 100)).Min(lim(Tokens, Hour, 1000))
	w := NewWindows(l, 0)
	for i := range 4 {
		if _, _, ok := w.Reserve(at(float64(i)), Cost{1, 200}); !ok {
			t.Fatal("refused")
		}
	}
	b, ok := w.Tightest(at(4), Requests)
	if !ok || b.Period != Minute || b.Remaining != 6 || b.Used != 4 || b.Limit != 10 {
		t.Fatalf("tightest requests window %+v", b)
	}
	if b.Reset != time.Duration(at(3+62)-at(4)) {
		t.Fatalf("reset %v: want until the slot of the last request leaves (61 s)", b.Reset)
	}
	b, _ = w.Tightest(at(4), Tokens)
	if b.Period != Hour || b.Remaining != 200 || b.Reset != time.Duration(at(62*60)-at(4)) {
		t.Fatalf("tokens window %+v", b)
	}
	// Once the minute has refilled, the day is the tightest when it has
	// less left.
	w.Set(lim(Requests, Minute, 10).Min(lim(Requests, Day, 8)))
	b, _ = w.Tightest(at(4), Requests)
	if b.Period != Day || b.Remaining != 4 {
		t.Fatalf("with 4 of 8 a day left the day window is tightest, got %+v", b)
	}
	if _, ok := w.Tightest(at(4), Tokens); ok {
		t.Fatal("the tokens window was removed from the limits")
	}
	if room := w.Room(at(5), Requests); room != 4 {
		t.Fatalf("room %d, want 4", room)
	}
	if room := w.Room(at(5), Tokens); room != -1 {
		t.Fatalf("room of an unlimited dimension %d, want -1", room)
	}
}

func TestSetKeepsWhatWasUsed(t *testing.T) {
	w := NewWindows(lim(Requests, Minute, 5), 0)
	for range 4 {
		w.Reserve(at(0), req())
	}
	w.Set(lim(Requests, Minute, 10))
	if room := w.Room(at(1), Requests); room != 6 {
		t.Fatalf("raising the limit to 10 with 4 used leaves %d, want 6", room)
	}
	w.Set(lim(Requests, Minute, 3))
	if _, ok := w.Fits(at(1), req()); ok {
		t.Fatal("lowering the limit below what was used must refuse")
	}
}

func TestStateRestores(t *testing.T) {
	l := lim(Tokens, Minute, 1000).Min(lim(Tokens, Day, 5000))
	w := NewWindows(l, time.Second)
	for i := range 10 {
		w.Charge(at(float64(i)*7), tok(int64(10*i+1)))
	}
	w.Refund(at(70), at(63), Tokens, 5)
	fresh := NewWindows(l, time.Second)
	fresh.Restore(w.State())
	for _, s := range []float64{70, 100, 130, 200} {
		for p := range NumPeriods {
			a, aok := w.Bucket(at(s), Tokens, p)
			b, bok := fresh.Bucket(at(s), Tokens, p)
			if a != b || aok != bok {
				t.Fatalf("at %vs %v: restored %+v, original %+v", s, p, b, a)
			}
		}
	}
}

// TestExtraHoldsUnitsLonger: a credit grain counts what it granted for
// its lease time beyond the window.
func TestExtraHoldsUnitsLonger(t *testing.T) {
	w := NewWindows(lim(Requests, Minute, 1), time.Second)
	w.Reserve(at(0), req())
	_, ref, ok := w.Reserve(at(1), req())
	if ok || ref.RetryAt != at(63) {
		t.Fatalf("retry at %v, want 63 s (60 + margin slot + its own + one second of lease)", float64(ref.RetryAt-t0)/float64(sec))
	}
}

// TestNoSequenceExceedsAnyWindow is the property: whatever requests
// arrive, whenever, with whatever costs, refunds and settlements below
// their estimates, every interval of a window's length (plus the margin
// slot) holds at most the limit of what stayed charged, except a single
// request larger than the whole limit. And every refusal's RetryAt is
// truthful: the request fits then and not a nanosecond before.
func TestNoSequenceExceedsAnyWindow(t *testing.T) {
	var admittedAll, refusedAll int
	defer func() {
		if admittedAll == 0 || refusedAll < admittedAll/10 {
			t.Errorf("the sequences did not exercise the limits: %d admitted, %d refused", admittedAll, refusedAll)
		}
	}()
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var l Limits
		for d := range NumDims {
			for p := range NumPeriods {
				if rng.IntN(3) == 0 {
					base := []int64{5, 50, 500}[rng.IntN(3)]
					l[d][p] = base * (1 + int64(p)*int64(rng.IntN(4)))
				}
			}
		}
		if !l.Any() {
			l[Requests][Minute] = 3
		}
		w := NewWindows(l, 0)
		type charge struct {
			at   int64
			cost Cost
		}
		var admitted []charge
		var res []Reservation
		now := t0 + rng.Int64N(sec*3600)
		for range 400 {
			// Time moves in steps from a millisecond to a quarter hour.
			now += []int64{sec / 1000, sec / 3, sec, 7 * sec, 61 * sec, 900 * sec}[rng.IntN(6)] * rng.Int64N(3)
			if len(res) > 0 && rng.IntN(3) == 0 {
				i := rng.IntN(len(res))
				if res[i].Active() {
					refund := rng.IntN(4) == 0
					actual := rng.Int64N(admitted[i].cost[Tokens] + 1) // at most the estimate
					w.Settle(now, &res[i], actual, refund)
					if refund {
						admitted[i].cost = Cost{}
					} else {
						admitted[i].cost[Tokens] = actual
					}
				}
				continue
			}
			cost := Cost{1, rng.Int64N(120)}
			r, ref, ok := w.Reserve(now, cost)
			if !ok {
				refusedAll++
				if _, fits := w.clone().Fits(ref.RetryAt, cost); !fits {
					t.Fatalf("seed %d: a refused request does not fit at its RetryAt", seed)
				}
				if _, fits := w.clone().Fits(ref.RetryAt-1, cost); fits {
					t.Fatalf("seed %d: a refused request already fits before its RetryAt", seed)
				}
				continue
			}
			admittedAll++
			res = append(res, r)
			admitted = append(admitted, charge{now, cost})
		}
		for d := range NumDims {
			for p := range NumPeriods {
				limit := l[d][p]
				if limit == 0 {
					continue
				}
				span := int64(Period(p).Width() + Period(p).Slot())
				// Every interval [a, a+span) with a at an admission.
				for i := range admitted {
					var sum, n int64
					biggest := int64(0)
					for j := i; j < len(admitted) && admitted[j].at < admitted[i].at+span; j++ {
						if admitted[j].at < admitted[i].at {
							continue
						}
						sum += admitted[j].cost[d]
						biggest = max(biggest, admitted[j].cost[d])
						if admitted[j].cost[d] > 0 {
							n++
						}
					}
					if sum > limit && !(n == 1 && biggest > limit) {
						t.Fatalf("seed %d: %d %s in %v from %d (limit %d per %v)", seed, sum, Dim(d), time.Duration(span), i, limit, Period(p))
					}
				}
			}
		}
	}
}
