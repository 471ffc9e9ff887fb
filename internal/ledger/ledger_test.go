package ledger

import (
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/omniroute/gateway/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testutil.LeakOptions()...) }

func TestEstimate(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hello"}]}`) // 60 bytes
	in, out := Estimate(body, -1, 0, DefaultOutputTokens)
	if in != 15 || out != 1024 {
		t.Fatalf("in %d out %d", in, out)
	}
	if _, out := Estimate(body, 200, 1, DefaultOutputTokens); out != 200 {
		t.Fatalf("max_tokens ignored: %d", out)
	}
	if _, out := Estimate(body, 0, 1, 512); out != 512 {
		t.Fatalf("zero max_tokens must fall back to the default: %d", out)
	}
	// n answers may each use max_tokens.
	for _, c := range []struct{ max, n, want int64 }{{200, 128, 25600}, {0, 3, 3 * 1024}, {200, -1, 200}} {
		if _, out := Estimate(body, c.max, c.n, DefaultOutputTokens); out != c.want {
			t.Fatalf("max_tokens %d, n %d: output %d, want %d", c.max, c.n, out, c.want)
		}
	}
	img := `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,` + strings.Repeat("A", 400000) + `"}}]}]}`
	in, _ = Estimate([]byte(img), 10, 1, 1)
	if in < ImageTokens || in > ImageTokens+100 {
		t.Fatalf("an inline image must cost about %d tokens, not its bytes: %d", ImageTokens, in)
	}
}

func TestParseUsage(t *testing.T) {
	cases := []struct {
		name string
		data []string
		want Usage
		ok   bool
	}{
		{"chat completion", []string{`{"id":"x","choices":[{"message":{"content":"the \"usage\":{\"prompt_tokens\":99} is quoted"}}],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17,"prompt_tokens_details":{"cached_tokens":3}}}`},
			Usage{Input: 12, Output: 5, InputCached: 3, Seen: true}, true},
		{"chat usage chunk", []string{`{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`},
			Usage{Input: 7, Output: 3, Seen: true}, true},
		{"details before the counts, a nested cached_tokens elsewhere ignored", []string{`{"usage":{"prompt_tokens_details":{"audio_tokens":0,"x":{"cached_tokens":9},"cached_tokens":1024},"completion_tokens_details":{"cached_tokens":7},"prompt_tokens":2000,"completion_tokens":10}}`},
			Usage{Input: 2000, Output: 10, InputCached: 1024, Seen: true}, true},
		{"usage null", []string{`{"choices":[{"delta":{"content":"hi"}}],"usage":null}`}, Usage{}, false},
		{"anthropic stream is cumulative", []string{
			`{"type":"message_start","message":{"id":"m","usage":{"input_tokens":25,"cache_read_input_tokens":100,"cache_creation_input_tokens":0,"output_tokens":1}}}`,
			`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":15}}`,
			`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":40}}`},
			Usage{Input: 25, CacheRead: 100, Output: 40, Seen: true}, true},
		{"responses completed", []string{`{"type":"response.completed","sequence_number":9,"response":{"id":"r","output":[{"content":[{"text":"usage"}]}],"usage":{"input_tokens":30,"input_tokens_details":{"cached_tokens":6},"output_tokens":8,"output_tokens_details":{"reasoning_tokens":2},"total_tokens":38}}}`},
			Usage{Input: 30, Output: 8, InputCached: 6, Seen: true}, true},
		{"no usage", []string{`{"choices":[]}`}, Usage{}, false},
		{"garbage", []string{`{"usage":{"prompt_tokens":"12","completion_tokens":-1`}, Usage{}, false},
	}
	for _, c := range cases {
		var u Usage
		ok := false
		for _, d := range c.data {
			if ParseUsage([]byte(d), &u) {
				ok = true
			}
		}
		if ok != c.ok || u != c.want {
			t.Errorf("%s: got %+v %v, want %+v %v", c.name, u, ok, c.want, c.ok)
		}
	}
	u := Usage{Input: 25, CacheRead: 100, Output: 40, CacheCreation: 5, InputCached: 20}
	if u.Total() != 170 { // InputCached is part of Input already
		t.Fatalf("total %d", u.Total())
	}
}

func TestCounterWindows(t *testing.T) {
	var c Counter
	if _, _, ok := c.Reserve(5, 600, 1000); !ok {
		t.Fatal("first reservation refused")
	}
	if _, used, ok := c.Reserve(5, 500, 1000); ok || used != 600 {
		t.Fatalf("over the limit admitted (used %d)", used)
	}
	if _, _, ok := c.Reserve(5, 400, 1000); !ok {
		t.Fatal("exact fit refused")
	}
	// Settling below the estimate frees budget in the same window.
	c.Adjust(5, 400, 100)
	if got := c.Used(5); got != 700 {
		t.Fatalf("used after settle %d", got)
	}
	// A new window starts empty.
	if w, before, ok := c.Reserve(6, 900, 1000); !ok || w != 6 || before != 0 {
		t.Fatalf("new window: %d %d %v", w, before, ok)
	}
	// A late settle for the old window changes nothing.
	c.Adjust(5, 600, 0)
	if got := c.Used(6); got != 900 {
		t.Fatalf("old settle leaked into the new window: %d", got)
	}
	// A caller whose clock still reads the old window is charged to the
	// counter's current window instead of resetting it.
	if w, _, ok := c.Reserve(5, 200, 1000); ok || w != 6 {
		t.Fatalf("stale window reset the counter: %d %v", w, ok)
	}
	// An oversized request is admitted into an empty window only.
	var d Counter
	if _, _, ok := d.Reserve(1, 5000, 1000); !ok {
		t.Fatal("oversized request never admitted")
	}
	if _, _, ok := d.Reserve(1, 1, 1000); ok {
		t.Fatal("admitted after the oversized request")
	}
	// The index wraps modulo 2^20 without confusing "ahead".
	var e Counter
	e.Reserve(idxMod-1, 10, 100)
	if _, before, _ := e.Reserve(0, 10, 100); before != 0 {
		t.Fatalf("wrapped window kept %d", before)
	}
}

// TestCounterConcurrentReservationsAreExact: 50 goroutines reserving 1000
// tokens each against a 10 000 budget never hold more than the budget.
func TestCounterConcurrentReservationsAreExact(t *testing.T) {
	for round := 0; round < 50; round++ {
		var c Counter
		var wg sync.WaitGroup
		var mu sync.Mutex
		granted := 0
		start := make(chan struct{})
		for i := 0; i < 50; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if _, _, ok := c.Reserve(42, 1000, 10000); ok {
					mu.Lock()
					granted++
					mu.Unlock()
				}
			}()
		}
		close(start)
		wg.Wait()
		if granted != 10 || c.Used(42) != 10000 {
			t.Fatalf("round %d: granted %d, used %d", round, granted, c.Used(42))
		}
	}
}

func TestWindowMath(t *testing.T) {
	at := time.Date(2026, 1, 1, 10, 0, 59, 999e6, time.UTC)
	s, e := WindowBounds(at, time.Minute)
	if !s.Equal(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)) || !e.Equal(time.Date(2026, 1, 1, 10, 1, 0, 0, time.UTC)) {
		t.Fatalf("bounds %v %v", s, e)
	}
	if WindowIndex(at, time.Minute)+1 != WindowIndex(at.Add(time.Millisecond), time.Minute) {
		t.Fatal("windows are not epoch-aligned")
	}
}

func FuzzParseUsage(f *testing.F) {
	f.Add(`{"usage":{"prompt_tokens":1,"completion_tokens":2}}`)
	f.Add(`{"type":"message_delta","usage":{"output_tokens":15}}`)
	f.Add(`{"a":"\"usage\":{\"input_tokens\":5}","usage":null}`)
	f.Fuzz(func(t *testing.T, data string) {
		var u Usage
		ok := ParseUsage([]byte(data), &u)
		if u.Input < 0 || u.Output < 0 || u.CacheRead < 0 || u.CacheCreation < 0 || ok != u.Seen {
			t.Fatalf("%q → %+v %v", data, u, ok)
		}
		Estimate([]byte(data), -1, 1, 1)
	})
}
