package mockprovider

import (
	"context"
	"sync"
	"testing"
)

// TestSlotsQueue: with 2 slots, 6 concurrent requests all succeed but never
// more than 2 are served at once; the other 4 wait in the queue.
func TestSlotsQueue(t *testing.T) {
	e := newEnv(t, Behavior{})
	e.setModels(t, map[string]Behavior{"m": {Slots: 2, LatencyMS: 300}})
	var wg sync.WaitGroup
	statuses := make(chan int, 6)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.post(t, context.Background(), chatPath, `{"model":"m"}`)
			if err != nil {
				t.Errorf("post: %v", err)
				return
			}
			statuses <- r.status
		}()
	}
	e.waitStats(t, "2 served and 4 queued", func(s Stats) bool {
		return s.Models["m"].Inflight == 2 && s.Models["m"].Queued == 4
	})
	wg.Wait()
	close(statuses)
	for s := range statuses {
		if s != 200 {
			t.Errorf("status %d, want 200", s)
		}
	}
	m := e.stats(t).Models["m"]
	if m.MaxInflight != 2 || m.Completed != 6 || m.Queued != 0 || m.Inflight != 0 {
		t.Errorf("model counters = %+v, want max_inflight 2 and 6 completed", m)
	}
}

// TestSlotsReject: with 2 slots held, further requests get 429 with
// Retry-After: 1 in the endpoint's error format.
func TestSlotsReject(t *testing.T) {
	for _, path := range []string{chatPath, messagesPath} {
		t.Run(path, func(t *testing.T) {
			e := newEnv(t, Behavior{})
			e.setModels(t, map[string]Behavior{"m": {Slots: 2, OverSlots: "reject", Fail: FailSpec{Mode: FailHang}}})
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, _ = e.post(t, ctx, path, `{"model":"m"}`)
				}()
			}
			e.waitStats(t, "2 holders", func(s Stats) bool { return s.Totals.Inflight == 2 })
			for range 4 {
				r := e.mustPost(t, path, `{"model":"m"}`)
				if r.status != 429 || r.header.Get("Retry-After") != "1" {
					t.Errorf("got %d Retry-After %q: %s", r.status, r.header.Get("Retry-After"), r.body)
				}
			}
			cancel()
			wg.Wait()
			st := e.waitStats(t, "holders cancelled", func(s Stats) bool { return s.Totals.Cancelled == 2 })
			m := st.Models["m"]
			if m.Requests != 6 || m.Failed != 4 || m.MaxInflight != 2 {
				t.Errorf("model counters = %+v, want 6 requests, 4 failed, max_inflight 2", m)
			}
		})
	}
}
