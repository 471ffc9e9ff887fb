package loadgen

import (
	"context"
	"testing"
	"time"

	"github.com/omniroute/gateway/internal/mockprovider"
	"github.com/omniroute/gateway/internal/testutil"
	"github.com/omniroute/gateway/internal/testutil/mocktest"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func spec(model string, stream bool) *Spec {
	body := `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]`
	if stream {
		body += `,"stream":true`
	}
	return &Spec{Path: "/v1/chat/completions", Body: []byte(body + "}"), Stream: stream, Timeout: 2 * time.Second,
		Headers: [][2]string{{"Authorization", "Bearer bench"}}}
}

func run(t *testing.T, addr string, s *Spec, l Load) Summary {
	t.Helper()
	c := NewClient(addr, max(l.Concurrency, l.Workers, 1))
	defer c.Close()
	r, err := Run(context.Background(), c, s, l)
	if err != nil {
		t.Fatal(err)
	}
	return Summarize(r, s.Stream)
}

func TestOutcomes(t *testing.T) {
	_, addr := mocktest.Start(t, mockprovider.Options{}, map[string]mockprovider.Behavior{
		"ok":     {},
		"paced":  {LatencyMS: 20, ChunkCount: 4, ChunkGapMS: 5},
		"reject": {Fail: mockprovider.FailSpec{Mode: mockprovider.FailStatus, Status: 503, RetryAfter: "1", Code: "overloaded_now"}},
		"429":    {Fail: mockprovider.FailSpec{Mode: mockprovider.FailStatus, Status: 429}},
		"hang":   {Fail: mockprovider.FailSpec{Mode: mockprovider.FailHang}},
		"inband": {Fail: mockprovider.FailSpec{Mode: mockprovider.FailErrorEvent, AfterChunks: 1, Code: "boom"}},
		"trunc":  {Fail: mockprovider.FailSpec{Mode: mockprovider.FailTruncate, AfterChunks: 1}},
		"reset":  {Fail: mockprovider.FailSpec{Mode: mockprovider.FailReset, AfterChunks: -1}},
	})
	closed := Load{Concurrency: 2, Duration: 150 * time.Millisecond}
	tests := []struct {
		name   string
		model  string
		stream bool
		check  func(t *testing.T, s Summary)
	}{
		{"ok", "ok", false, func(t *testing.T, s Summary) {
			if s.OK == 0 || s.OK != s.Arrivals || s.Statuses["200"] != s.OK || s.Latency.P50 <= 0 || s.Throughput <= 0 || s.Hist.Total() != int64(s.OK) {
				t.Fatalf("%+v", s)
			}
		}},
		{"stream paced", "paced", true, func(t *testing.T, s Summary) {
			// role chunk + 4 content + final chunk + [DONE] = 7 data events.
			if s.OK == 0 || s.Events != int64(7*s.Arrivals) || s.TTFT == nil || s.TTFT.P50 < 19 || s.Latency.P50 < s.TTFT.P50+14 {
				t.Fatalf("%+v ttft %+v", s, s.TTFT)
			}
		}},
		{"503 with retry-after and code", "reject", false, func(t *testing.T, s Summary) {
			if s.OK != 0 || s.Rejections != s.Arrivals || s.RejectionsRetryAfter != s.Rejections || s.Codes["overloaded_now"] != s.Arrivals || s.RejectionLatency.N != s.Arrivals {
				t.Fatalf("%+v", s)
			}
		}},
		{"429 without retry-after", "429", true, func(t *testing.T, s Summary) {
			if s.Rejections == 0 || s.RejectionsRetryAfter != 0 || s.Statuses["429"] != s.Arrivals || len(s.Codes) == 0 {
				t.Fatalf("%+v", s)
			}
		}},
		{"in-band error", "inband", true, func(t *testing.T, s Summary) {
			if s.InBandErrors != s.Arrivals || s.OK != 0 || s.Codes["boom"] != s.Arrivals {
				t.Fatalf("%+v", s)
			}
		}},
		{"truncated", "trunc", true, func(t *testing.T, s Summary) {
			if s.Truncated != s.Arrivals || s.OK != 0 {
				t.Fatalf("%+v", s)
			}
		}},
		{"reset", "reset", false, func(t *testing.T, s Summary) {
			if s.ConnErrors != s.Arrivals || s.Answered != 0 {
				t.Fatalf("%+v", s)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, run(t, addr, spec(tc.model, tc.stream), closed))
		})
	}

	t.Run("anthropic stream", func(t *testing.T) {
		s := &Spec{Path: "/v1/messages", Body: []byte(`{"model":"paced","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}`),
			Stream: true, Timeout: 2 * time.Second, Headers: [][2]string{{"x-api-key", "bench"}}}
		sum := run(t, addr, s, closed)
		// message_start, content_block_start, ping, 4 deltas, block stop,
		// message_delta, message_stop: 10 events, complete at message_stop.
		if sum.OK == 0 || sum.OK != sum.Arrivals || sum.Truncated != 0 || sum.Events != int64(10*sum.Arrivals) || sum.TTFT == nil || sum.TTFT.P50 < 19 {
			t.Fatalf("%+v ttft %+v", sum, sum.TTFT)
		}
	})

	t.Run("pause after rejection", func(t *testing.T) {
		// One worker refused at once for 300 ms: without a pause it sends
		// hundreds of requests; with a 100 ms pause at most 3 or 4.
		sum := run(t, addr, spec("reject", false), Load{Concurrency: 1, Duration: 300 * time.Millisecond, PauseAfterRejection: 100 * time.Millisecond})
		if sum.Arrivals == 0 || sum.Arrivals > 4 || sum.Rejections != sum.Arrivals {
			t.Fatalf("%+v", sum)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		s := spec("hang", false)
		s.Timeout = 100 * time.Millisecond
		sum := run(t, addr, s, Load{Concurrency: 1, Duration: 50 * time.Millisecond})
		if sum.Timeouts != sum.Arrivals || sum.Arrivals == 0 {
			t.Fatalf("%+v", sum)
		}
	})
}

func TestOpenLoopIsSeededPoissonAndBounded(t *testing.T) {
	_, addr := mocktest.Start(t, mockprovider.Options{}, map[string]mockprovider.Behavior{"ok": {}, "slow": {LatencyMS: 50}})
	l := Load{Rate: 2000, Duration: 300 * time.Millisecond, Workers: 64, Seed: 7}
	a := run(t, addr, spec("ok", false), l)
	b := run(t, addr, spec("ok", false), l)
	// 600 expected arrivals; a Poisson count is within ±5 σ (≈ ±125).
	if a.Arrivals < 475 || a.Arrivals > 725 || a.Arrivals != b.Arrivals {
		t.Fatalf("arrivals %d and %d with the same seed", a.Arrivals, b.Arrivals)
	}
	if a.Mode != "open" || a.SendLag == nil || a.OK != a.Arrivals {
		t.Fatalf("%+v", a)
	}

	// Two workers against a 50 ms answer at 200/s: the generator backs
	// up; latency counts from the scheduled time, so it grows far beyond
	// the 50 ms service time, and arrivals past the hard stop are not sent.
	s := spec("slow", false)
	s.Timeout = 200 * time.Millisecond
	c := run(t, addr, s, Load{Rate: 200, Duration: 400 * time.Millisecond, Workers: 2, Seed: 1})
	if c.MaxBacklog < 10 || c.LateSends == 0 || c.Latency.Max < 150 || c.NotSent == 0 || c.Arrivals != c.OK+c.NotSent {
		t.Fatalf("backlogged open loop: %+v", c)
	}
}

// TestElapsedCoversTheRun: a phase's elapsed time runs until its last
// request finished, at least its duration, in both loops; the rates and
// the cores figures divide by it.
func TestElapsedCoversTheRun(t *testing.T) {
	_, addr := mocktest.Start(t, mockprovider.Options{}, map[string]mockprovider.Behavior{"slow": {LatencyMS: 50}})
	const d = 200 * time.Millisecond
	for _, l := range []Load{{Concurrency: 2, Duration: d}, {Rate: 100, Duration: d, Workers: 4, Seed: 3}} {
		s := run(t, addr, spec("slow", false), l)
		if s.ElapsedS < d.Seconds() {
			t.Fatalf("%+v: elapsed %v s, want at least the %v of the phase", l, s.ElapsedS, d)
		}
	}
}

func TestRunRejectsBadLoads(t *testing.T) {
	c := NewClient("127.0.0.1:1", 1)
	defer c.Close()
	for _, l := range []Load{{Duration: time.Second}, {Concurrency: 1, Rate: 1, Duration: time.Second}, {Concurrency: 1}} {
		if _, err := Run(context.Background(), c, spec("x", false), l); err == nil {
			t.Fatalf("%+v accepted", l)
		}
	}
}

func TestStatsAndHistogram(t *testing.T) {
	ns := []int64{5e6, 1e6, 2e6, 4e6, 3e6}
	s := StatsOf(ns)
	if s.N != 5 || s.Min != 1 || s.P50 != 3 || s.P99 != 5 || s.Max != 5 || s.Mean != 3 {
		t.Fatalf("%+v", s)
	}
	h := NewHistogram()
	h.Add(1e3)  // 1 µs: underflow
	h.Add(10e3) // 10 µs: first bucket
	h.Add(1e6)  // 1 ms
	h.Add(1e15) // overflow
	if h.Counts[0] != 1 || h.Counts[1] != 1 || h.Counts[len(h.Counts)-1] != 1 || h.Total() != 4 {
		t.Fatalf("%v", h.Counts)
	}
	i := 1 + 2*BucketsPerDecade // 1 ms is two decades above 10 µs
	if h.Counts[i] != 1 {
		t.Fatalf("1 ms not in bucket %d: %v", i, h.Counts)
	}
	var m Histogram
	m.Merge(h)
	m.Merge(h)
	if m.Total() != 8 {
		t.Fatal(m.Total())
	}
}
