package clock

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// recorder collects which timers fired and the fake time each saw.
type recorder struct {
	mu    sync.Mutex
	fired []string
}

func (r *recorder) fn(c Clock, name string) func() {
	return func() {
		r.mu.Lock()
		r.fired = append(r.fired, fmt.Sprintf("%s@%s", name, c.Now().Sub(t0)))
		r.mu.Unlock()
	}
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.fired
	r.fired = nil
	return got
}

// TestFakeFiresInOrder: each Advance fires exactly the timers due by its
// new time, earliest first, ties in scheduling order, each seeing the new
// time as Now; Stop and Reset change what fires.
func TestFakeFiresInOrder(t *testing.T) {
	type step struct {
		op   string // "after name d", "stop name", "reset name d", "advance d", "set d"
		want []string
		ret  bool // Stop's or Reset's result
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"due order, not scheduling order", []step{
			{op: "after c 30ms"}, {op: "after a 10ms"}, {op: "after b 20ms"},
			{op: "advance 25ms", want: []string{"a@25ms", "b@25ms"}},
			{op: "advance 5ms", want: []string{"c@30ms"}},
			{op: "advance 1h", want: nil},
		}},
		{"ties fire in scheduling order", []step{
			{op: "after x 10ms"}, {op: "after y 10ms"}, {op: "after z 10ms"},
			{op: "advance 10ms", want: []string{"x@10ms", "y@10ms", "z@10ms"}},
		}},
		{"not due yet: nothing fires", []step{
			{op: "after a 10ms"},
			{op: "advance 9ms", want: nil},
			{op: "advance 1ms", want: []string{"a@10ms"}},
		}},
		{"zero and negative delays wait for an Advance", []step{
			{op: "after a 0s"}, {op: "after b -5ms"},
			{op: "advance 0s", want: []string{"a@0s", "b@0s"}},
		}},
		{"stop before due: never fires", []step{
			{op: "after a 10ms"}, {op: "after b 20ms"},
			{op: "stop a", ret: true},
			{op: "advance 1h", want: []string{"b@1h0m0s"}},
			{op: "stop a", ret: false},
			{op: "stop b", ret: false},
		}},
		{"reset before due moves it", []step{
			{op: "after a 10ms"}, {op: "after b 20ms"},
			{op: "advance 5ms"},
			{op: "reset a 30ms", ret: true}, // due at 35ms
			{op: "advance 20ms", want: []string{"b@25ms"}},
			{op: "advance 10ms", want: []string{"a@35ms"}},
		}},
		{"reset after firing schedules it again", []step{
			{op: "after a 10ms"},
			{op: "advance 10ms", want: []string{"a@10ms"}},
			{op: "reset a 5ms", ret: false},
			{op: "advance 5ms", want: []string{"a@15ms"}},
		}},
		{"reset to a tie goes behind the others", []step{
			{op: "after a 10ms"}, {op: "after b 10ms"},
			{op: "reset a 10ms", ret: true},
			{op: "advance 10ms", want: []string{"b@10ms", "a@10ms"}},
		}},
		{"set forward fires, set back does not", []step{
			{op: "after a 10ms"}, {op: "after b 50ms"},
			{op: "set 20ms", want: []string{"a@20ms"}},
			{op: "set 0s", want: nil}, // b is still due at 50ms
			{op: "advance 49ms", want: nil},
			{op: "advance 1ms", want: []string{"b@50ms"}},
		}},
		{"advance back fires nothing", []step{
			{op: "after a 10ms"},
			{op: "advance -1h", want: nil},
			{op: "advance 1h", want: nil},
			{op: "advance 10ms", want: []string{"a@10ms"}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFake(t0)
			var r recorder
			timers := map[string]Timer{}
			for i, s := range tc.steps {
				var verb, name, arg string
				fmt.Sscan(s.op, &verb, &name, &arg)
				dur := func(s string) time.Duration {
					d, err := time.ParseDuration(s)
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					return d
				}
				var ret bool
				switch verb {
				case "after":
					timers[name] = f.AfterFunc(dur(arg), r.fn(f, name))
				case "stop":
					ret = timers[name].Stop()
				case "reset":
					ret = timers[name].Reset(dur(arg))
				case "advance":
					f.Advance(dur(name))
				case "set":
					f.Set(t0.Add(dur(name)))
				}
				if (verb == "stop" || verb == "reset") && ret != s.ret {
					t.Fatalf("step %d %q returned %v, want %v", i, s.op, ret, s.ret)
				}
				if got := r.take(); !slices.Equal(got, s.want) {
					t.Fatalf("step %d %q fired %v, want %v", i, s.op, got, s.want)
				}
			}
		})
	}
}

// TestFakeCallbackSchedules: a timer a callback schedules is due relative
// to the new time and waits for the next Advance, so a repeating tick
// fires once per Advance however far it jumps.
func TestFakeCallbackSchedules(t *testing.T) {
	f := NewFake(t0)
	var r recorder
	var tick Timer
	tick = f.AfterFunc(10*time.Millisecond, func() {
		r.fn(f, "tick")()
		tick.Reset(10 * time.Millisecond)
	})
	if now := f.Advance(35 * time.Millisecond); !now.Equal(t0.Add(35 * time.Millisecond)) {
		t.Fatalf("Advance returned %v", now)
	}
	if got, want := r.take(), []string{"tick@35ms"}; !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	if in, ok := f.Next(); !ok || in != 10*time.Millisecond || f.Pending() != 1 {
		t.Fatalf("next in %v (%v), pending %d; want the tick due in 10ms", in, ok, f.Pending())
	}
	f.Advance(9 * time.Millisecond)
	f.Advance(time.Millisecond)
	f.Advance(10 * time.Millisecond)
	if got, want := r.take(), []string{"tick@45ms", "tick@55ms"}; !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	if !tick.Stop() || f.Pending() != 0 {
		t.Fatal("the tick did not stop")
	}
	if _, ok := f.Next(); ok {
		t.Fatal("Next reports a timer after the last was stopped")
	}
}

// TestFakeStopInsideCallback: a callback may stop another timer due at
// the same instant; that one then does not fire.
func TestFakeStopInsideCallback(t *testing.T) {
	f := NewFake(t0)
	var r recorder
	var b Timer
	f.AfterFunc(time.Millisecond, func() { r.fn(f, "a")(); b.Stop() })
	b = f.AfterFunc(time.Millisecond, r.fn(f, "b"))
	f.Advance(time.Second)
	if got := r.take(); !slices.Equal(got, []string{"a@1s"}) {
		t.Fatalf("fired %v", got)
	}
}

// TestFakeConcurrentUse: timers scheduled, stopped and reset from many
// goroutines while others advance fire at most once each, never after a
// successful Stop, and the race detector sees no unsynchronised access.
func TestFakeConcurrentUse(t *testing.T) {
	f := NewFake(t0)
	const workers, each = 8, 200
	var fired [workers * each]atomic.Int32
	var stopped [workers * each]atomic.Bool
	// rearmed: Reset found the timer already fired (it ran on an
	// advancer's goroutine between AfterFunc and Reset), so it runs again,
	// as time.AfterFunc's Reset does.
	var rearmed [workers * each]atomic.Bool
	var wg sync.WaitGroup
	done := make(chan struct{})
	var advancers sync.WaitGroup
	for a := 0; a < 2; a++ {
		advancers.Add(1)
		go func() {
			defer advancers.Done()
			for {
				select {
				case <-done:
					return
				default:
					f.Advance(time.Millisecond)
					_ = f.Now()
				}
			}
		}()
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				k := w*each + i
				tm := f.AfterFunc(time.Duration(i%5)*time.Millisecond, func() {
					if stopped[k].Load() {
						t.Errorf("timer %d fired after Stop reported it pending", k)
					}
					fired[k].Add(1)
				})
				switch i % 3 {
				case 0:
					if tm.Stop() {
						stopped[k].Store(true)
					}
				case 1:
					if !tm.Reset(time.Millisecond) {
						rearmed[k].Store(true)
					}
				}
			}
		}(w)
	}
	wg.Wait()
	close(done)
	advancers.Wait()
	f.Advance(time.Hour) // everything still pending fires now
	if n := f.Pending(); n != 0 {
		t.Fatalf("%d timers still pending after an hour", n)
	}
	for k := range fired {
		n, s, r := fired[k].Load(), stopped[k].Load(), rearmed[k].Load()
		want := int32(1)
		switch {
		case s:
			want = 0
		case r:
			want = 2
		}
		if n != want {
			t.Fatalf("timer %d fired %d times, want %d (stopped %v, re-armed after firing %v)", k, n, want, s, r)
		}
	}
}

// TestRealAfterFunc: the real clock's timer runs f and stops like
// time.AfterFunc's.
func TestRealAfterFunc(t *testing.T) {
	var c Clock = Real{}
	ran := make(chan struct{})
	c.AfterFunc(time.Millisecond, func() { close(ran) })
	<-ran
	never := c.AfterFunc(time.Hour, func() { t.Error("a stopped real timer ran") })
	if !never.Stop() || never.Stop() {
		t.Fatal("Stop of a pending real timer: want true once, then false")
	}
}
