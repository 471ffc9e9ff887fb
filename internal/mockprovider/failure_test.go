package mockprovider

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const chatPath, messagesPath, responsesPath = "/v1/chat/completions", "/v1/messages", "/v1/responses"

func TestStatusFailure(t *testing.T) {
	tests := []struct {
		name       string
		path       string
		fail       FailSpec
		wantStatus int
		wantBody   string // substring of the error body
		wantHeader map[string]string
	}{
		{"openai 429", chatPath, FailSpec{Mode: FailStatus, Status: 429, RetryAfter: "7"}, 429,
			`"type":"rate_limit_exceeded","code":"rate_limit_exceeded","param":null`, map[string]string{"Retry-After": "7"}},
		{"openai insufficient_quota", chatPath, FailSpec{Mode: FailStatus, Status: 429, Code: "insufficient_quota"}, 429,
			`"type":"insufficient_quota","code":"insufficient_quota"`, nil},
		{"openai 500 default", responsesPath, FailSpec{Mode: FailStatus}, 500, `"type":"server_error"`, nil},
		{"anthropic 429", messagesPath, FailSpec{Mode: FailStatus, Status: 429, RetryAfter: "5", RetryAfterMS: 4500}, 429,
			`{"type":"error","error":{"type":"rate_limit_error"`, map[string]string{"Retry-After": "5", "Retry-After-Ms": "4500"}},
		{"anthropic 529", messagesPath, FailSpec{Mode: FailStatus, Status: 529}, 529, `"type":"overloaded_error"`, nil},
		{"anthropic 500", messagesPath, FailSpec{Mode: FailStatus, Status: 500}, 500, `"type":"api_error"`, nil},
		{"raw body and headers", chatPath, FailSpec{Mode: FailStatus, Status: 402, Body: `{"error":{"code":402,"metadata":{"limit_source":"openrouter_credits"}}}`,
			Headers: map[string]string{"x-should-retry": "false"}}, 402, `"limit_source":"openrouter_credits"`, map[string]string{"X-Should-Retry": "false"}},
		{"error_event on non-stream", chatPath, FailSpec{Mode: FailErrorEvent}, 500, `"type":"server_error"`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Behavior{})
			e.setModels(t, map[string]Behavior{"flaky": {Fail: tc.fail}})
			r := e.mustPost(t, tc.path, `{"model":"flaky"}`)
			if r.status != tc.wantStatus || !strings.Contains(string(r.body), tc.wantBody) {
				t.Fatalf("got %d %s, want %d containing %s", r.status, r.body, tc.wantStatus, tc.wantBody)
			}
			if !json.Valid(r.body) {
				t.Errorf("error body is not JSON: %s", r.body)
			}
			for k, v := range tc.wantHeader {
				if got := r.header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			// Other models keep the default behaviour.
			if r := e.mustPost(t, tc.path, `{"model":"steady"}`); r.status != 200 {
				t.Errorf("default model got %d %s", r.status, r.body)
			}
		})
	}
}

func TestFailTimes(t *testing.T) {
	e := newEnv(t, Behavior{})
	e.setModels(t, map[string]Behavior{"m": {Fail: FailSpec{Mode: FailStatus, Status: 503, Times: 2}}})
	var got []int
	for range 4 {
		got = append(got, e.mustPost(t, chatPath, `{"model":"m"}`).status)
	}
	if want := []int{503, 503, 200, 200}; !slices.Equal(got, want) {
		t.Errorf("statuses = %v, want %v", got, want)
	}
	// Setting the behaviour again restarts the count.
	e.setModels(t, map[string]Behavior{"m": {Fail: FailSpec{Mode: FailStatus, Status: 503, Times: 1}}})
	got = got[:0]
	for range 2 {
		got = append(got, e.mustPost(t, chatPath, `{"model":"m"}`).status)
	}
	if want := []int{503, 200}; !slices.Equal(got, want) {
		t.Errorf("after update statuses = %v, want %v", got, want)
	}
	m := e.stats(t).Models["m"]
	if m.Requests != 6 || m.Failed != 3 || m.Completed != 3 {
		t.Errorf("model counters = %+v, want 6 requests, 3 failed, 3 completed", m)
	}
}

// TestClientDisconnectCancelled proves that every kind of wait notices a
// departed client and counts it as cancelled exactly once.
func TestClientDisconnectCancelled(t *testing.T) {
	tests := []struct {
		name   string
		beh    Behavior
		body   string
		before func(t *testing.T, e *testEnv) // occupies slots etc.
		ready  func(Stats) bool
	}{
		{name: "hang", beh: Behavior{Fail: FailSpec{Mode: FailHang}}, body: `{"model":"m"}`,
			ready: func(s Stats) bool { return s.Totals.Inflight == 1 }},
		{name: "latency", beh: Behavior{LatencyMS: 60000}, body: `{"model":"m"}`,
			ready: func(s Stats) bool { return s.Totals.Inflight == 1 }},
		{name: "stream gap", beh: Behavior{ChunkGapMS: 60000}, body: `{"model":"m","stream":true}`,
			ready: func(s Stats) bool { return s.Totals.Inflight == 1 }},
		{name: "stream latency", beh: Behavior{LatencyMS: 60000}, body: `{"model":"m","stream":true}`,
			ready: func(s Stats) bool { return s.Totals.Inflight == 1 }},
		{name: "slot queue", beh: Behavior{Slots: 1, Fail: FailSpec{Mode: FailHang}}, body: `{"model":"m"}`,
			ready: func(s Stats) bool { return s.Totals.Queued == 1 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Behavior{})
			e.setModels(t, map[string]Behavior{"m": tc.beh})
			var wg sync.WaitGroup
			defer wg.Wait()
			holdCtx, releaseHolder := context.WithCancel(context.Background())
			defer releaseHolder()
			if tc.beh.Slots > 0 { // a first request takes the only slot and hangs
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, _ = e.post(t, holdCtx, chatPath, `{"model":"m"}`)
				}()
				e.waitStats(t, "slot holder", func(s Stats) bool { return s.Totals.Inflight == 1 })
			}
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				r, err := e.post(t, ctx, chatPath, tc.body)
				if err == nil {
					err = r.readErr
				}
				errc <- err
			}()
			e.waitStats(t, "request in progress", tc.ready)
			cancelled := time.Now()
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Errorf("client error = %v, want context.Canceled", err)
			}
			for e.srv.Stats().Totals.Cancelled == 0 && time.Since(cancelled) < 2*time.Second {
				time.Sleep(time.Millisecond)
			}
			t.Logf("cancel noticed %s after the client left", time.Since(cancelled).Round(time.Millisecond))
			st := e.waitStats(t, "cancel counted", func(s Stats) bool { return s.Totals.Cancelled == 1 })
			if st.Totals.Queued != 0 || st.Models["m"].Cancelled != 1 {
				t.Errorf("after cancel: totals %+v model %+v", st.Totals, st.Models["m"])
			}
			releaseHolder()
			wg.Wait()
			st = e.waitStats(t, "all ended", func(s Stats) bool { return s.Totals.Inflight == 0 })
			wantCancelled := int64(1 + min(tc.beh.Slots, 1))
			if st.Totals.Cancelled != wantCancelled || st.Totals.Completed+st.Totals.Failed != 0 {
				t.Errorf("final totals %+v, want exactly %d cancelled", st.Totals, wantCancelled)
			}
		})
	}
}

// TestCloseEndsHungRequests checks that Close answers hung requests with a
// 503 and returns promptly.
func TestCloseEndsHungRequests(t *testing.T) {
	srv := New(Options{Default: Behavior{Fail: FailSpec{Mode: FailHang}}})
	addr, err := srv.Start("")
	if err != nil {
		t.Fatal(err)
	}
	e := &testEnv{srv: srv, base: "http://" + addr, hc: newEnvClient()}
	e.admin = &Client{BaseURL: e.base}
	defer e.hc.CloseIdleConnections()
	results := make(chan rawResp, 2)
	for _, body := range []string{`{"model":"a"}`, `{"model":"b","stream":true}`} {
		go func() {
			r, err := e.post(t, context.Background(), chatPath, body)
			if err != nil {
				r.readErr = err
			}
			results <- r
		}()
	}
	e.waitStats(t, "two hung requests", func(s Stats) bool { return s.Totals.Inflight == 2 })
	start := time.Now()
	if err := srv.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("close took %s", d)
	}
	for range 2 {
		if r := <-results; r.status != 503 {
			t.Errorf("hung request got %d %s (err %v), want 503", r.status, r.body, r.readErr)
		}
	}
	if st := srv.Stats(); st.Totals.Failed != 2 || st.Totals.Inflight != 0 {
		t.Errorf("totals after close = %+v", st.Totals)
	}
	if _, err := srv.Start(""); err == nil {
		t.Error("Start after Close succeeded")
	}
}
