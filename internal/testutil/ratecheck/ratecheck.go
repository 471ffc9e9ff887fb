// Package ratecheck offers a steady rate of requests and judges what a
// provider limited to so many requests a minute saw of them, by the
// provider's own arrival times: the end-to-end check of rolling limits
// (docs/quota.md), shared by the single-node and the cluster tests.
package ratecheck

import (
	"net/http"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Run is an open loop's record: when each request was sent, its
// status and its Retry-After.
type Run struct {
	mu    sync.Mutex
	sends []Send
}

// Send is one request of a Run.
type Send struct {
	At         time.Time
	Status     int
	RetryAfter time.Duration // 0 unless refused
	Err        error
}

// Offer sends rate requests a second for d, spread over the
// addresses in turn (a single node, or a cluster's members), and returns
// what each got. post sends one request to an address.
func Offer(rate int, d time.Duration, addrs []string, post func(addr string) (int, http.Header, error)) *Run {
	run := &Run{}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		<-tick.C
		wg.Add(1)
		go func(addr string) {
			defer wg.Done()
			s := Send{At: time.Now()}
			status, h, err := post(addr)
			s.Status, s.Err = status, err
			if status == 429 {
				if v, err := strconv.Atoi(h.Get("Retry-After")); err == nil {
					s.RetryAfter = time.Duration(v) * time.Second
				}
			}
			run.mu.Lock()
			run.sends = append(run.sends, s)
			run.mu.Unlock()
		}(addrs[i%len(addrs)])
	}
	wg.Wait()
	sort.Slice(run.sends, func(i, j int) bool { return run.sends[i].At.Before(run.sends[j].At) })
	return run
}

// Limit is what Check judges a Run against.
type Limit struct {
	// Requests is the provider's limit per minute; Duration the Run's.
	Requests int
	Duration time.Duration
	// Slack is how much later than the moment a request would have fitted
	// at the provider a Retry-After may point: the gateway counts a
	// window a margin slot longer, in slots a second wide, and rounds up
	// to whole seconds (a cluster's grain counts a grant CreditTTL
	// longer still).
	Slack time.Duration
	// Grace is how long after a refusal a request admitted before it
	// may still reach the provider: at most the trip there on one node;
	// in a cluster, credit a node was granted before the refusal may be
	// spent until CreditTTL after it asked.
	Grace time.Duration
}

// Check checks what a provider limited to l.Requests a minute saw of a
// Run, by the provider's own arrival times arr:
//   - no interval of a minute, wherever it starts, holds more than the
//     limit;
//   - at least 90 % of what a steady limit a minute allows arrived;
//   - every refusal's Retry-After is truthful: it is not earlier than the
//     first moment from the refusal on at which the provider's minute has
//     room, given the arrivals up to the refusal and those the gateway
//     may have admitted before it (the arrivals up to Grace after it),
//     and no more than Slack later than the moment one more request fits
//     when those arrivals all count as admitted before it; and nothing reached
//     the provider after Grace and before the Retry-After (less its
//     rounding up to a whole second).
//
// Room is a moment's: the minute ending then holds fewer than the limit.
// A unit that frees goes to whoever asks first, without reservations (the
// provider's own Retry-After works the same way, and a cluster has no
// central queue), so room that appears at the moment a refusal named and
// is then taken by another caller (an arrival after that moment) does
// not make the refusal untrue; a moment the arrivals before it leave
// full does.
func Check(t testing.TB, run *Run, arr []time.Time, l Limit) {
	t.Helper()
	const minute = time.Minute
	limit := l.Requests
	worst := 0
	for i := range arr {
		n := sort.Search(len(arr), func(j int) bool { return !arr[j].Before(arr[i].Add(minute)) }) - i
		worst = max(worst, n)
		if n > limit {
			t.Errorf("the provider saw %d requests in the minute from %s: more than the limit of %d", n, arr[i].Format("15:04:05.000"), limit)
			break
		}
	}
	steady := int(float64(limit) * l.Duration.Minutes())
	if want := steady * 9 / 10; len(arr) < want {
		t.Errorf("the provider saw %d requests in %s: less than 90 %% of what %d a minute allows (%d)", len(arr), l.Duration, limit, want)
	}
	var ok, refused, errs int
	var worstLate, worstEarly time.Duration
	for _, s := range run.sends {
		switch {
		case s.Err != nil || (s.Status != 200 && s.Status != 429):
			errs++
			if errs <= 3 {
				t.Errorf("a request sent at %s got %d, %v", s.At.Format("15:04:05.000"), s.Status, s.Err)
			}
			continue
		case s.Status == 200:
			ok++
			continue
		}
		refused++
		if s.RetryAfter <= 0 {
			t.Errorf("a refusal at %s has no Retry-After", s.At.Format("15:04:05.000"))
			continue
		}
		// What was admitted before the refusal: the arrivals up to Grace
		// after it.
		before := arr[:sort.Search(len(arr), func(j int) bool { return arr[j].After(s.At.Add(l.Grace)) })]
		// An arrival within Grace after the refusal was either admitted
		// before it (credit granted earlier) or took room that appeared
		// after it; from outside the two look alike, so each bound takes
		// the reading that favours the Retry-After: the earliest room
		// counts such an arrival only once it has arrived (roomAt), the
		// lateness counts it as admitted before the refusal (fitsAt).
		room := roomAt(before, s.At, limit)
		retry := s.At.Add(s.RetryAfter)
		if retry.Before(room) {
			t.Errorf("a refusal at %s said Retry-After %s, but the provider's minute is full until %s",
				s.At.Format("15:04:05.000"), s.RetryAfter, room.Format("15:04:05.000"))
		}
		fits := fitsAt(before, s.At, limit)
		late := retry.Sub(fits)
		worstLate = max(worstLate, late)
		if late > l.Slack {
			t.Errorf("a refusal at %s said Retry-After %s, %s after the request would have fitted at the provider", s.At.Format("15:04:05.000"), s.RetryAfter, late)
		}
		// Nothing admitted after the refusal reached the provider before
		// the Retry-After (less its rounding up to a whole second).
		if next := len(before); next < len(arr) {
			early := retry.Sub(arr[next])
			worstEarly = max(worstEarly, early)
			if early > time.Second {
				t.Errorf("a refusal at %s said Retry-After %s, yet the provider got a request %s before it", s.At.Format("15:04:05.000"), s.RetryAfter, early)
			}
		}
	}
	t.Logf("%d sent: %d answered, %d refused, %d errors; the provider saw %d (at most %d in any minute; %d a minute steadily allow %d); "+
		"a Retry-After at most %s after the provider had room; the next arrival at most %s before a Retry-After",
		len(run.sends), ok, refused, errs, len(arr), worst, limit, steady, worstLate, worstEarly)
	if refused == 0 {
		t.Error("nothing was refused: the limit was not exercised")
	}
}

// roomAt is the first moment from t on at which the provider's minute
// has room, given the arrivals admitted (sorted, some of them possibly
// after t): a moment x at which the minute ending at x, (x - 1 min, x],
// holds fewer than limit of them. Arrivals after x do not count: they may
// have taken the room x had. The candidates are t and the moments the
// arrivals leave their minute.
func roomAt(admitted []time.Time, t time.Time, limit int) time.Time {
	room := func(x time.Time) bool {
		lo := sort.Search(len(admitted), func(j int) bool { return admitted[j].After(x.Add(-time.Minute)) })
		hi := sort.Search(len(admitted), func(j int) bool { return admitted[j].After(x) })
		return hi-lo < limit
	}
	return firstFrom(admitted, t, room)
}

// fitsAt is the earliest moment from t on at which one more request fits
// at the provider, given the arrivals admitted (sorted, some of them
// possibly after t): a moment x such that every minute holding x holds
// fewer than limit of them. The candidates are t and the moments the
// arrivals leave their minute.
func fitsAt(admitted []time.Time, t time.Time, limit int) time.Time {
	count := func(from time.Time) int { // admitted in [from, from + a minute)
		lo := sort.Search(len(admitted), func(j int) bool { return !admitted[j].Before(from) })
		hi := sort.Search(len(admitted), func(j int) bool { return !admitted[j].Before(from.Add(time.Minute)) })
		return hi - lo
	}
	fits := func(x time.Time) bool {
		// The minutes holding x start in (x - 1 min, x]; the fullest
		// starts just after that bound or at an arrival.
		if count(x.Add(-time.Minute+time.Nanosecond)) >= limit {
			return false
		}
		lo := sort.Search(len(admitted), func(j int) bool { return admitted[j].After(x.Add(-time.Minute)) })
		for j := lo; j < len(admitted) && !admitted[j].After(x); j++ {
			if count(admitted[j]) >= limit {
				return false
			}
		}
		return true
	}
	return firstFrom(admitted, t, fits)
}

// firstFrom is the earliest of the candidates t and the moments the
// admitted arrivals leave their minute (after t) at which ok holds; t when
// none does.
func firstFrom(admitted []time.Time, t time.Time, ok func(time.Time) bool) time.Time {
	if ok(t) {
		return t
	}
	for _, a := range admitted {
		if x := a.Add(time.Minute); x.After(t) && ok(x) {
			return x
		}
	}
	return t
}
