package ledger

import (
	"strings"
	"testing"

	"github.com/omniroute/gateway/internal/testutil"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

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
