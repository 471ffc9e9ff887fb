package mockprovider

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/testutil"
)

// newLoggedEnv is newEnv with the request log on, keeping x-request-id.
func newLoggedEnv(t *testing.T) *testEnv {
	t.Helper()
	return newEnvWith(t, Options{RequestLog: RequestLogOptions{Max: 100, Headers: []string{"X-Request-Id"}}})
}

// fire sends n requests to model m at once and returns a wait for their
// statuses.
func (e *testEnv) fire(t *testing.T, n int, m string) func() []int {
	t.Helper()
	var wg sync.WaitGroup
	out := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.post(t, context.Background(), chatPath, `{"model":"`+m+`"}`, "X-Request-Id", "r"+itoa(int64(i)))
			if err != nil {
				t.Errorf("post: %v", err)
				return
			}
			out[i] = r.status
		}()
	}
	return func() []int { wg.Wait(); return out }
}

func allOK(t *testing.T, statuses []int) {
	t.Helper()
	for i, s := range statuses {
		if s != 200 {
			t.Errorf("request %d: status %d, want 200", i, s)
		}
	}
}

// TestSlotsShrinkInPlace: 4 served and 4 queued when slots go 4 → 2. The
// 4 being served finish; no queued request starts while 2 or more are in
// service, so the new capacity holds from the step on (a replaced channel
// semaphore would have run its old holders and waiters beside the new one).
func TestSlotsShrinkInPlace(t *testing.T) {
	e := newLoggedEnv(t)
	e.setModels(t, map[string]Behavior{"m": {Slots: 4, LatencyMS: 150}})
	done := e.fire(t, 8, "m")
	e.waitStats(t, "4 served and 4 queued", func(s Stats) bool { return s.Models["m"].Inflight == 4 && s.Models["m"].Queued == 4 })
	step := time.Now()
	e.setModels(t, map[string]Behavior{"m": {Slots: 2, LatencyMS: 150}})
	allOK(t, done())
	recs := e.srv.Requests().Records
	if len(recs) != 8 {
		t.Fatalf("%d records, want 8", len(recs))
	}
	late := 0
	for _, r := range recs {
		if r.Outcome != "completed" || r.Started.IsZero() || r.Ended.Before(r.Started) || r.Started.Before(r.Arrived) {
			t.Fatalf("record %+v", r)
		}
		if r.Started.Before(step) {
			continue
		}
		late++
		busy := 0
		for _, o := range recs {
			if o.Seq != r.Seq && !o.Started.After(r.Started) && o.Ended.After(r.Started) {
				busy++
			}
		}
		if busy >= 2 {
			t.Errorf("request %d started while %d others were served (slots 2)", r.Seq, busy)
		}
	}
	if late != 4 {
		t.Errorf("%d requests started after the step, want the 4 queued ones", late)
	}
}

// TestSlotsGrowGrantsQueued: slots 1 → 3 with 3 waiting starts two of them
// at once, beside the holder.
func TestSlotsGrowGrantsQueued(t *testing.T) {
	e := newEnv(t, Behavior{})
	e.setModels(t, map[string]Behavior{"m": {Slots: 1, LatencyMS: 300}})
	done := e.fire(t, 4, "m")
	e.waitStats(t, "1 served and 3 queued", func(s Stats) bool { return s.Models["m"].Inflight == 1 && s.Models["m"].Queued == 3 })
	e.setModels(t, map[string]Behavior{"m": {Slots: 3, LatencyMS: 300}})
	e.waitStats(t, "3 served", func(s Stats) bool { m := s.Models["m"]; return m.Inflight == 3 && m.Queued <= 1 })
	allOK(t, done())
	if m := e.stats(t).Models["m"]; m.Completed != 4 || m.MaxInflight != 3 {
		t.Errorf("counters %+v, want 4 completed, max in flight 3", m)
	}
}

// TestHangReleasedByBehaviourChange: hung requests (stream and not) are
// answered as successes when their model's behaviour changes, and only
// then; a change to another model leaves them hung.
func TestHangReleasedByBehaviourChange(t *testing.T) {
	e := newEnv(t, Behavior{})
	e.setModels(t, map[string]Behavior{"m": {Fail: FailSpec{Mode: FailHang}}, "other": {}})
	var wg sync.WaitGroup
	results := make([]rawResp, 2)
	for i, body := range []string{`{"model":"m"}`, `{"model":"m","stream":true}`} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.post(t, context.Background(), chatPath, body)
			if err != nil {
				t.Errorf("post: %v", err)
			}
			results[i] = r
		}()
	}
	e.waitStats(t, "2 hung", func(s Stats) bool { return s.Models["m"].Inflight == 2 })
	e.setModels(t, map[string]Behavior{"other": {LatencyMS: 1}})
	if m := e.stats(t).Models["m"]; m.Inflight != 2 || m.Completed != 0 {
		t.Fatalf("a change to another model ended the hang: %+v", m)
	}
	e.setModels(t, map[string]Behavior{"m": {}})
	wg.Wait()
	for i, r := range results {
		if r.status != 200 || r.readErr != nil || !strings.Contains(string(r.body), "Hello") {
			t.Errorf("request %d after the release: %d %v %s", i, r.status, r.readErr, r.body)
		}
	}
	if m := e.stats(t).Models["m"]; m.Completed != 2 || m.Cancelled != 0 {
		t.Errorf("counters %+v, want 2 completed", m)
	}
}

// TestScheduledBehaviour: after_ms defers the update (validated at once),
// the admin API and ScheduleBehavior agree, and Close cancels what has not
// run.
func TestScheduledBehaviour(t *testing.T) {
	e := newEnv(t, Behavior{})
	e.setModels(t, map[string]Behavior{"m": {LatencyMS: 1}})
	if err := e.admin.SetBehavior(BehaviorUpdate{AfterMS: -1}); err == nil || !strings.Contains(err.Error(), "after_ms") {
		t.Fatalf("negative after_ms: %v", err)
	}
	if err := e.admin.SetBehavior(BehaviorUpdate{AfterMS: 100, Models: map[string]Behavior{"m": {Slots: -1}}}); err == nil {
		t.Fatal("an invalid scheduled behaviour was accepted")
	}
	start := time.Now()
	if err := e.admin.SetBehavior(BehaviorUpdate{AfterMS: 200, Models: map[string]Behavior{"m": {LatencyMS: 2}}}); err != nil {
		t.Fatal(err)
	}
	latency := func() int { return e.srv.table.Load().models["m"].b.LatencyMS }
	if got := latency(); got != 1 && time.Since(start) < 200*time.Millisecond {
		t.Fatalf("applied before its time: latency %d", got)
	}
	testutil.Until(t, "the scheduled update applied", func() bool { return latency() == 2 })
	if time.Since(start) < 200*time.Millisecond {
		t.Fatalf("applied after %v, before its 200 ms", time.Since(start))
	}

	srv := New(Options{})
	if _, err := srv.Start(""); err != nil {
		t.Fatal(err)
	}
	if err := srv.ScheduleBehavior(time.Now().Add(time.Hour), BehaviorUpdate{Models: map[string]Behavior{"x": {}}}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.ScheduleBehavior(time.Now(), BehaviorUpdate{}); err == nil {
		t.Fatal("scheduled on a closed server")
	}
}

// TestRequestLogAndIntegrals: the request log keeps the chosen header and
// each request's times and outcome (a slot rejection never started), and
// the in-flight integral of one request lies between its latency and the
// wall time around it.
func TestRequestLogAndIntegrals(t *testing.T) {
	e := newLoggedEnv(t)
	e.setModels(t, map[string]Behavior{"m": {LatencyMS: 100}, "busy": {Slots: 1, OverSlots: "reject", Fail: FailSpec{Mode: FailHang}}})
	_, at0 := e.srv.ModelCounters("m")
	before := time.Now()
	if r := e.mustPost(t, chatPath, `{"model":"m"}`, "X-Request-Id", "one", "X-Other", "dropped"); r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	c, at1 := e.srv.ModelCounters("m")
	elapsed := at1.Sub(at0)
	if time.Duration(c.InflightNS) < 100*time.Millisecond || time.Duration(c.InflightNS) > elapsed || c.QueuedNS != 0 {
		t.Errorf("in-flight integral %v (queued %v) for one 100 ms request in %v", time.Duration(c.InflightNS), time.Duration(c.QueuedNS), elapsed)
	}
	done := e.fire(t, 1, "busy")
	e.waitStats(t, "holder", func(s Stats) bool { return s.Models["busy"].Inflight == 1 })
	if r := e.mustPost(t, chatPath, `{"model":"busy"}`); r.status != 429 {
		t.Fatalf("over slots: %d", r.status)
	}
	e.setModels(t, map[string]Behavior{"busy": {}})
	allOK(t, done())

	var log RequestLog
	var err error
	if log, err = e.admin.Requests(); err != nil {
		t.Fatal(err)
	}
	if len(log.Records) != 3 || log.Dropped != 0 {
		t.Fatalf("log %+v", log)
	}
	one := log.Records[0]
	if one.Model != "m" || one.Headers["x-request-id"] != "one" || len(one.Headers) != 1 || one.Outcome != "completed" ||
		one.Arrived.Before(before) || one.Ended.Sub(one.Started) < 100*time.Millisecond {
		t.Errorf("first record %+v", one)
	}
	rejected := log.Records[2]
	if rejected.Model != "busy" || rejected.Outcome != "failed" || !rejected.Started.IsZero() || rejected.Ended.IsZero() {
		t.Errorf("rejected record %+v", rejected)
	}
	if err := e.admin.Reset(); err != nil {
		t.Fatal(err)
	}
	if log, _ := e.admin.Requests(); len(log.Records) != 0 {
		t.Errorf("%d records after reset", len(log.Records))
	}
	resp, err := e.hc.Get(e.base + "/_mock/requests")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET /_mock/requests: %d", resp.StatusCode)
	}
}

// TestRequestLogBounded: past Max, requests are counted, not kept.
func TestRequestLogBounded(t *testing.T) {
	var l requestLog
	l.init(RequestLogOptions{Max: 2})
	for i := range 5 {
		l.ended(l.arrive(uint64(i), []byte("/p"), "m", nil), outcomeCompleted)
	}
	got := l.log()
	if len(got.Records) != 2 || got.Dropped != 3 || got.Records[1].Outcome != "completed" {
		t.Fatalf("%+v", got)
	}
}
